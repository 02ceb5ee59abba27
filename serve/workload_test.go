package serve

import (
	"strings"
	"testing"
)

// A trace and the histogram of the same requests give the same means; bad rows name the line.
func TestParseWorkload(t *testing.T) {
	trace, err := ParseWorkload("t.csv", strings.NewReader("isl,osl\n100,10\n100,10\n# a comment\n\n400,30\n"))
	if err != nil {
		t.Fatal(err)
	}
	hist, err := ParseWorkload("h.csv", strings.NewReader("100,10,2\n400,30,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []Workload{trace, hist} {
		isl, osl := w.Means()
		if isl != 200 || osl != 50.0/3 {
			t.Errorf("means %g, %g; want 200 and 16.67 by hand", isl, osl)
		}
		if q := w.Quantile(0.9); q != 400 {
			t.Errorf("p90 ISL %g, want 400", q)
		}
		if q := w.Quantile(0.5); q != 100 {
			t.Errorf("p50 ISL %g, want 100", q)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"100,10\n100\n", "w.csv:2: want isl,osl"},
		{"100,ten\n", `w.csv:1: osl "ten" is not a number`},
		{"0,10\n", "w.csv:1: isl 0 must be a whole number"},
		{"10.5,10\n", "w.csv:1: isl 10.5"},
		{"10,10,-1\n", "w.csv:1: count -1 must be positive"},
		{"isl,osl\n", "w.csv: no requests"},
	} {
		if _, err := ParseWorkload("w.csv", strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

// Prefix-cache hits skip prefill: a higher hit rate never lowers throughput or raises TTFT,
// and a full hit still computes one token per prompt.
func TestPrefixHitHelps(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	rp := replica(t, m, "H100", 1)
	var prev Result
	for i, h := range []float64{0, 0.5, 0.9} {
		rp.Engine.PrefixHit = h
		r, err := rp.Users(4000, 200, 64)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && (r.OutputTokS < prev.OutputTokS || r.TTFT > prev.TTFT) {
			t.Errorf("hit %g: %g tok/s, TTFT %g; at the lower hit rate %g, %g", h, r.OutputTokS, r.TTFT, prev.OutputTokS, prev.TTFT)
		}
		prev = r
	}
	if got := (Engine{PrefixHit: 1}).computed(4000); got != 1 {
		t.Errorf("a full hit computes %d tokens, want 1", got)
	}
}
