// main.cpp — the Catch2 entry point of the test suite.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
