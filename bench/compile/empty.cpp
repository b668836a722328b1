// The floor of bench/compile/measure.py's table: what the compiler costs for a file with nothing in it.
