// Placeholder so CMake can form a shared library from archives.
