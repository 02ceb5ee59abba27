// Package conventions holds no code: its tests check the house rules of ARCHITECTURE.md that a
// machine can check (imports between packages, no I/O in the pure packages, the README's Go
// version and package table against the code).
package conventions
