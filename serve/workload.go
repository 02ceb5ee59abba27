package serve

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// Workload is a distribution of request lengths: ISL,OSL pairs, each with a weight (a count
// from a histogram, 1 per line of a trace).
type Workload struct {
	ISL, OSL, Weight []float64
}

// MaxWorkloadRows bounds a workload file (a trace of a day's requests fits; a runaway file
// does not fill memory).
const MaxWorkloadRows = 10_000_000

// ParseWorkload reads a CSV of "isl,osl" (one request per line) or "isl,osl,count" (a
// histogram); a header line of field names, blank lines and # comments are skipped. name is
// used in errors, which give the line.
func ParseWorkload(name string, r io.Reader) (Workload, error) {
	var w Workload
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, ",")
		if line == 1 && len(f) > 0 && strings.EqualFold(strings.TrimSpace(f[0]), "isl") {
			continue
		}
		if len(f) != 2 && len(f) != 3 {
			return w, fmt.Errorf("workload %s:%d: want isl,osl or isl,osl,count, got %d fields", name, line, len(f))
		}
		var v [3]float64
		v[2] = 1
		for i, s := range f {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			what := [...]string{"isl", "osl", "count"}[i]
			switch {
			case err != nil:
				return w, fmt.Errorf("workload %s:%d: %s %q is not a number", name, line, what, strings.TrimSpace(s))
			case i < 2 && (x < 1 || x != math.Trunc(x) || x > 1<<24):
				return w, fmt.Errorf("workload %s:%d: %s %s must be a whole number of tokens from 1 to 16,777,216", name, line, what, strings.TrimSpace(s))
			case i == 2 && (!(x > 0) || math.IsInf(x, 0)):
				return w, fmt.Errorf("workload %s:%d: count %s must be positive", name, line, strings.TrimSpace(s))
			}
			v[i] = x
		}
		if len(w.ISL) == MaxWorkloadRows {
			return w, fmt.Errorf("workload %s:%d: more than %d rows", name, line, MaxWorkloadRows)
		}
		w.ISL, w.OSL, w.Weight = append(w.ISL, v[0]), append(w.OSL, v[1]), append(w.Weight, v[2])
	}
	if err := sc.Err(); err != nil {
		return w, fmt.Errorf("workload %s:%d: %w", name, line+1, err)
	}
	if len(w.ISL) == 0 {
		return w, fmt.Errorf("workload %s: no requests", name)
	}
	return w, nil
}

// Means are the weighted mean ISL and OSL. The steady state of an engine serving the mix is
// the renewal-reward average: a sequence's KV reservation, its prompt tokens per decode step
// and its context in decode attention are all linear in the lengths, so the means carry the
// throughput (TTFT of a long prompt is longer: see Quantile).
func (w Workload) Means() (isl, osl float64) {
	var n float64
	for i := range w.ISL {
		isl += w.Weight[i] * w.ISL[i]
		osl += w.Weight[i] * w.OSL[i]
		n += w.Weight[i]
	}
	return isl / n, osl / n
}

// Quantile is the weighted q-quantile of the ISLs (q in [0, 1]).
func (w Workload) Quantile(q float64) float64 {
	idx := make([]int, len(w.ISL))
	var total float64
	for i := range idx {
		idx[i] = i
		total += w.Weight[i]
	}
	sort.Slice(idx, func(a, b int) bool { return w.ISL[idx[a]] < w.ISL[idx[b]] })
	var acc float64
	for _, i := range idx {
		acc += w.Weight[i]
		if acc >= q*total {
			return w.ISL[i]
		}
	}
	return w.ISL[idx[len(idx)-1]]
}

// Requests is the number of requests the workload describes (the sum of the counts).
func (w Workload) Requests() float64 {
	var n float64
	for _, x := range w.Weight {
		n += x
	}
	return n
}

// Sample is n requests drawn from the mix in proportion to the weights (stratified: the
// weighted quantiles at (i+1/2)/n), in a fixed shuffled order so lengths interleave as a
// trace's do; the same workload gives the same requests.
func (w Workload) Sample(n int) []Request {
	if n <= 0 || len(w.ISL) == 0 {
		return nil
	}
	var total float64
	for _, x := range w.Weight {
		total += x
	}
	out := make([]Request, 0, n)
	i, acc := 0, w.Weight[0]
	for k := 0; k < n; k++ {
		q := (float64(k) + 0.5) / float64(n) * total
		for acc < q && i < len(w.ISL)-1 {
			i++
			acc += w.Weight[i]
		}
		out = append(out, Request{ISL: int64(w.ISL[i]), OSL: int64(w.OSL[i])})
	}
	rng := rand.New(rand.NewPCG(uint64(n), 0x776c64)) // fixed: the same workload, the same order
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// UseWorkload makes a request mix, named name, the planner's question: its mean lengths for the
// steady state, its prompt quantiles for TTFT, a sample the step simulation draws from, and a
// line that says so.
func (o *PlanOptions) UseWorkload(name string, w Workload) {
	isl, osl := w.Means()
	o.ISL, o.OSL = int64(math.Round(isl)), int64(math.Round(osl))
	o.Prompts, o.PromptQuantiles = nil, nil
	for _, q := range []float64{0.5, 0.9, 0.99} {
		o.Prompts = append(o.Prompts, int64(math.Round(w.Quantile(q))))
		o.PromptQuantiles = append(o.PromptQuantiles, q)
	}
	o.Lengths = w.Sample(1000) // the simulation draws its requests from the mix
	o.Workload = fmt.Sprintf("workload %s: %.0f requests, mean ISL %.0f, mean OSL %.0f, ISL p50 %.0f / p90 %.0f (the steady state runs on the means; a p90 prompt waits longer for its first token)",
		name, w.Requests(), isl, osl, w.Quantile(0.5), w.Quantile(0.9))
}
