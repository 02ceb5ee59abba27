// Package compare sets one run against another: the headline metrics an analysis condenses to
// (and the analysis cache keeps), config and parameter differences, weight drift between
// checkpoints, the history of one metric across runs, and the sentence that says why a
// predicted time moved. It computes values only; it counts nothing itself (the analyzer does),
// knows no flags, and writes no markdown or charts (render does, from these values).
package compare
