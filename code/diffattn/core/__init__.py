"""The foundation: errors, paths, names, results, statistics, progress, figures (the standard library at import; numpy, scipy and matplotlib are imported inside the functions that need them)."""
