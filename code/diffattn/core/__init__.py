"""The foundation: errors, paths, names, results, statistics, progress, figures (stdlib only; matplotlib imported lazily)."""
