"""The mathematics of LAPRAS proxy: pure, I/O-free.

Nothing here opens a socket, reads a file, looks at the clock or the environment. Data,
randomness and configuration enter only as arguments. This package imports the standard
library, numpy and scipy, and nothing else of this project.
"""
