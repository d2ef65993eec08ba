//! Opening an archive and reading any byte range of any file (the random-access contract, DESIGN-NOTES §3).
