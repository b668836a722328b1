# shellcheck shell=bash
# Sourced by the scripts in scripts/ (bash): folders that belong to the tree being tested.
#
# Machines are handed from one session to the next, and trees are cloned, copied and deleted, so a
# build folder may have been configured for another tree. Reusing it builds that other tree, or fails
# once it is gone ("Neither directory contains a build file meson.build"). These functions make sure a
# folder is this tree's before it is used:
#
#   builddir_check DIR           DIR is absent or empty, or a build folder of this tree; a build folder
#                                of another tree is removed (it is rebuilt from scratch); anything
#                                else (a folder we did not make, another tree's in-tree folder) is
#                                refused with a message and status 1
#   builddir_setup DIR [OPT...]  builddir_check, then `meson setup DIR TREE OPT...` unless DIR is
#                                already configured for this tree
#   builddir_claim DIR           builddir_check for a folder that is not a meson build (the fuzzers'):
#                                creates DIR and records this tree in DIR/.tracetree-tree
#   tree_copy DEST               copies the tree's files as a fresh clone with the uncommitted changes
#                                has them (tracked and new files; no .git, no build folders)
#
# tree_root is this tree's top folder with symbolic links resolved, as meson records it.

tree_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)

# Prints the tree a build folder was configured or claimed for ("" if none is recorded), then, for a
# meson build, the folder meson configured it as (a build folder cannot be moved: build.ninja holds
# absolute paths).
_builddir_owner() {  # DIR
    if [[ -f $1/meson-info/meson-info.json ]]; then
        python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["directories"]
print(d["source"]); print(d["build"])' "$1/meson-info/meson-info.json" 2>/dev/null || echo
    elif [[ -f $1/.tracetree-tree ]]; then
        head -n 1 "$1/.tracetree-tree"
    else
        echo
    fi
}

builddir_check() {  # DIR
    local dir=$1 real owner built
    [[ -e $dir ]] || return 0
    if [[ ! -d $dir ]]; then
        echo "builddir: $dir is not a folder" >&2
        return 1
    fi
    [[ -z $(ls -A "$dir") ]] && return 0
    real=$(cd "$dir" && pwd -P)
    { read -r owner || owner=; read -r built || built=; } < <(_builddir_owner "$dir")
    local meson=0
    [[ -d $dir/meson-private || -d $dir/meson-info || -f $dir/build.ninja ]] && meson=1
    if ((meson)); then
        # Ours only when meson configured this very folder for this tree, and the configuration finished.
        [[ $owner == "$tree_root" && $built == "$real" && -f $dir/build.ninja ]] && return 0
    elif [[ -f $dir/.tracetree-tree ]]; then
        [[ $owner == "$tree_root" ]] && return 0
    else
        echo "builddir: $dir is not empty and is not a build folder of a tracetree tree;" \
             "not touching it (remove it, or choose another folder)" >&2
        return 1
    fi
    # Another tree's folder inside that (still existing) tree is its own: never removed from here.
    if [[ -n $owner && $owner != "$tree_root" && -d $owner && $real/ == "$owner"/* ]]; then
        echo "builddir: $dir belongs to the tree $owner; refusing to use it for $tree_root" \
             "(choose another folder)" >&2
        return 1
    fi
    if [[ -z $owner ]] || { ((meson)) && [[ ! -f $dir/build.ninja ]]; }; then
        echo "builddir: $dir is an incomplete build folder: removing it and building afresh" >&2
    elif [[ $owner != "$tree_root" ]]; then
        echo "builddir: $dir was set up for $owner$([[ -d $owner ]] || echo ' (gone)')," \
             "not for this tree ($tree_root): removing it and building afresh" >&2
    else
        echo "builddir: $dir was configured as ${built:-another folder} (moved or copied):" \
             "removing it and building afresh" >&2
    fi
    rm -rf -- "$dir"
}

builddir_setup() {  # DIR [MESON-OPTION...]; the environment (CXX) passes through to meson
    local dir=$1 out
    shift
    builddir_check "$dir" || return 1
    [[ -f $dir/build.ninja ]] && return 0
    out=$(meson setup "$dir" "$tree_root" "$@" 2>&1) || {
        printf '%s\n' "$out" >&2
        echo "builddir: meson setup $dir failed (above)" >&2
        return 1
    }
}

builddir_claim() {  # DIR
    builddir_check "$1" || return 1
    mkdir -p "$1"
    [[ -f $1/.tracetree-tree ]] || echo "$tree_root" >"$1/.tracetree-tree"
}

tree_copy() {  # DEST
    local dest=$1
    mkdir -p "$dest"
    (
        cd "$tree_root" || exit 1
        if [[ $(git rev-parse --show-toplevel 2>/dev/null) == "$tree_root" ]]; then
            git ls-files -z --cached --others --exclude-standard
        else  # an unpacked archive: everything but build folders
            find . \( -name .git -o -path ./build -o -path './build-*' \) -prune -o -type f -print0
        fi | while IFS= read -r -d '' f; do
            if [[ -f $f ]]; then printf '%s\0' "$f"; fi  # tracked files deleted from the working tree: left out
        done | xargs -0 --no-run-if-empty cp --parents -t "$dest"
    )
}
