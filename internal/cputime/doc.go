// Package cputime reads the CPU time the process has used, the measure of
// work that the benchmarks report beside wall time: other programs on a
// shared machine disturb it much less; and the process's peak resident
// memory (PeakResident).
package cputime
