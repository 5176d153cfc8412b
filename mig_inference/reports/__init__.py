"""What the command line prints: plans, layouts, costs."""
