package measure

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Result files come from benchmark tools and training logs a user points mrep at: any bytes
// give runs or an error, never a panic, and every figure a parse returns is finite (a NaN
// would pass into the rows and the fits). Seeded with every tool's real files.
func FuzzParseResult(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(filepath.Base(p), b)
		}
	}
	f.Add("x.json", []byte(`{"date":"x","backend":"vllm","completed":1,"mean_ttft_ms":NaN}`))
	f.Add("x.log", []byte(" iteration 1/ 10 | elapsed time per iteration (ms): 1e400 |"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		// a parse that does not end is a failure too: the watchdog's panic kills the worker, so
		// the fuzzer keeps the input (a hang alone would only stall it)
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse(%q) of %d bytes ran 10 s", name, len(data))) })
		defer watchdog.Stop()
		runs, err := Parse(name, data)
		if err != nil {
			return
		}
		for _, r := range runs {
			for _, fg := range r.Figures {
				if math.IsNaN(fg.Value) || math.IsInf(fg.Value, 0) {
					t.Fatalf("%s: figure %s/%s is %v", name, fg.Metric, fg.Stat, fg.Value)
				}
			}
			// rows under a full context: built or refused, never a panic
			c := r.Resolve(Context{Model: "Llama-3.1-8B", Chip: "H100-SXM", GPUs: 8, TP: 8, DType: "bf16", Engine: "vllm", Seq: 4096, GBS: 8, MBS: 1})
			r.Rows(c, "fuzz", "fuzz")
		}
	})
}
