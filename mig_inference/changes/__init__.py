"""Day 2: the plan a stack exports, both versions simulated, and the change plan `diff` prints."""
