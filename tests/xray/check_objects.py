#!/usr/bin/env python3
"""demo-server-xray's Tomcat replica (examples/demo-xray): no tracetree symbol in its objects, defined
or referenced (TRACETREE_DISABLE left nothing), and XRay sleds in each (an xray_instr_map section).

usage: check_objects.py LIBRARY.a...
"""
import subprocess
import sys


def check(library):
    symbols = subprocess.run(['nm', '-C', library], check=True, capture_output=True, text=True).stdout
    # nm prints "member.o:" before each member's symbols; only the symbols themselves count.
    found = [line for line in symbols.splitlines() if line and not line.endswith(':') and 'tracetree' in line]
    members = [line[:-1] for line in symbols.splitlines() if line.endswith(':')]
    headers = subprocess.run(['objdump', '-h', library], check=True, capture_output=True, text=True).stdout
    sleds = {}  # object -> its xray_instr_map sections (one per function kept in a section of its own)
    current = None
    for line in headers.splitlines():
        if 'file format' in line:
            current = line.split(':')[0]
            sleds[current] = 0
        elif current is not None and 'xray_instr_map' in line:
            sleds[current] += 1
    print(f'{library}: {len(members)} objects, {len(found)} tracetree symbols')
    for member, count in sleds.items():
        print(f'  {member}: {count} xray_instr_map sections')
    for line in found:
        print('  tracetree symbol:', line)
    return not found and sleds and 0 not in sleds.values()


if __name__ == '__main__':
    results = [check(library) for library in sys.argv[1:]]
    sys.exit(0 if results and all(results) else 1)
