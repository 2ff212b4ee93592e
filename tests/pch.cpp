// Builds the tests' precompiled header (tests/CMakeLists.txt); runs nothing.
int main() { return 0; }
