package analyzer

import (
	"testing"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/timing"
)

// target is a chip with the achievable time model, as the commands build it.
func target(t testing.TB, chip, dtype string) Target {
	t.Helper()
	c, err := chips.Default().Lookup(chip)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timing.New(c, dtype)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTarget(c, dtype, tm)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
