"""Pure statistics (numpy/scipy only): arrays in, typed results out. Imports no other project package."""
