// Package testutil holds what several packages' tests share: the stress switch and tolerance
// checks. It imports no mrep package, so any package's tests can use it without an import
// cycle; the bundled example models are in testutil/bundled (it imports ingest).
package testutil

import (
	"math"
	"os"
	"testing"
)

// StressEnv is the switch that turns on the stress sizes: many-process rounds, many-writer runs,
// leave-one-out refits and long fuzzing (`make stress` sets it). Without it each such test runs
// a size that still exercises its path, so `go test ./...` stays within minutes on 2 cores.
const StressEnv = "MREP_STRESS"

// Stress reports whether MREP_STRESS asks for the stress sizes (any value but "" and "0").
func Stress() bool {
	v := os.Getenv(StressEnv)
	return v != "" && v != "0"
}

// Size is stress under MREP_STRESS, else small: a loop's count at the two sizes.
func Size(small, stress int) int {
	if Stress() {
		return stress
	}
	return small
}

// NeedStress skips t unless MREP_STRESS is set, saying what it would have run: for a test that
// has no smaller size worth running (a refit is a refit).
func NeedStress(t testing.TB, what string) {
	t.Helper()
	if !Stress() {
		t.Skipf("stress size (%s): run with %s=1 or make stress", what, StressEnv)
	}
}

// Near fails t unless got is within rel (a fraction of want) of want.
func Near(t testing.TB, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g (within %g)", what, got, want, rel)
	}
}
