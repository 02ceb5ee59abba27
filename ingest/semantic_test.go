package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mutated is a valid fixture decoded generically, changed by f and encoded again.
func mutated(t *testing.T, file string, f func(doc map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "valid", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mod(doc map[string]any, i int) map[string]any { return doc["modules"].([]any)[i].(map[string]any) }
func param(doc map[string]any, i, j int) map[string]any {
	return mod(doc, i)["params"].([]any)[j].(map[string]any)
}
func stats(doc map[string]any) map[string]any { return param(doc, 1, 0)["stats"].(map[string]any) }

// Each defect was accepted before and then miscounted or misreported; each is now rejected at
// its pointer with a plain message.
func TestSemanticDefects(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	cases := []struct {
		name, file string
		edit       func(doc map[string]any)
		ptr, msg   string
	}{
		{"hist lo above hi", "mlp_stats.json", func(d map[string]any) {
			h := stats(d)["hist"].(map[string]any)
			h["lo"], h["hi"] = h["hi"], h["lo"]
		}, "/modules/1/params/0/stats/hist/lo", "above hi"},
		{"hist outside the range", "mlp_stats.json", func(d map[string]any) { stats(d)["hist"].(map[string]any)["hi"] = n("9.5") }, "/modules/1/params/0/stats/hist", "outside"},
		{"std null for many values", "mlp_stats.json", func(d map[string]any) { stats(d)["std"] = nil }, "/modules/1/params/0/stats/std", "std is null"},
		{"std beyond the range", "mlp_stats.json", func(d map[string]any) { stats(d)["std"] = n("5.0") }, "/modules/1/params/0/stats/std", "impossible"},
		{"all non-finite with finite stats", "mlp_stats.json", func(d map[string]any) {
			s := stats(d)
			s["nonfinite"] = n("32")
			s["hist"].(map[string]any)["counts"] = []any{n("0")}
		}, "/modules/1/params/0/stats/nonfinite", "every value is non-finite"},
		{"tie to another shape", "tied_meta.json", func(d map[string]any) {
			p := param(d, 3, 0)
			p["shape"], p["numel"] = []any{n("8"), n("16")}, n("128")
		}, "/modules/3/params/0/tied_to", "tied tensors are one tensor"},
		{"tie to another dtype", "tied_meta.json", func(d map[string]any) { param(d, 3, 0)["dtype"] = "float16" }, "/modules/3/params/0/tied_to", "float16"},
		{"buffer tied to a param", "tied_meta.json", func(d map[string]any) {
			mod(d, 3)["buffers"] = []any{map[string]any{"name": "b", "shape": []any{n("8")}, "dtype": "float32", "numel": n("8"), "device": "meta", "persistent": true, "tied_to": "norm.weight"}}
		}, "/modules/3/buffers/0/tied_to", "a buffer tied to the param"},
		{"param and buffer of one name", "tied_meta.json", func(d map[string]any) {
			m := mod(d, 2)
			m["buffers"] = []any{map[string]any{"name": "weight", "shape": []any{n("8")}, "dtype": "float32", "numel": n("8"), "device": "meta", "persistent": true}}
		}, "/modules/2/buffers/0/name", "two tensors"},
		{"name not under its parent", "mlp_stats.json", func(d map[string]any) { mod(d, 3)["name"] = "x.2" }, "/modules/3/name", "not named under its parent"},
		{"unknown dtype", "mlp_stats.json", func(d map[string]any) { param(d, 1, 1)["dtype"] = "float7" }, "/modules/1/params/1/dtype", "unknown dtype"},
		{"lazy with a numel", "lazy.json", func(d map[string]any) { param(d, 1, 0)["numel"] = n("16") }, "/modules/1/params/0/numel", "lazy tensor has no size"},
		{"expert_axis on a matrix", "mlp_stats.json", func(d map[string]any) { param(d, 1, 0)["expert_axis"] = n("0") }, "/modules/1/params/0/expert_axis", "stacked"},
		{"trace total below a module", "traced.json", func(d map[string]any) { d["trace"].(map[string]any)["total_flops"] = n("1000") }, "/trace/total_flops", "inconsistent"},
		{"module traced twice", "traced.json", func(d map[string]any) {
			tr := d["trace"].(map[string]any)
			tr["modules"] = append(tr["modules"].([]any), tr["modules"].([]any)[2])
		}, "/trace/modules/3/name", "traced twice"},
		{"impossible created_at", "mlp_stats.json", func(d map[string]any) { d["run"].(map[string]any)["created_at"] = "2026-13-45T25:61:00Z" }, "/run/created_at", "not a real UTC time"},
		{"shape product overflows", "mlp_stats.json", func(d map[string]any) {
			p := param(d, 1, 1)
			p["shape"] = []any{n("4294967296"), n("4294967296")}
		}, "/modules/1/params/1/shape", "overflows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("d.json", bytes.NewReader(mutated(t, c.file, c.edit)), Options{})
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("accepted or wrong error: %v", err)
			}
			if e.Pointer != c.ptr || !strings.Contains(e.Msg, c.msg) {
				t.Errorf("got %s %q, want %s %q", e.Pointer, e.Msg, c.ptr, c.msg)
			}
		})
	}
}

// An empty tensor is empty whatever its other dimensions: [2^40, 2^40, 0] has 0 elements.
func TestZeroSizeTensorWithHugeDimsIsAccepted(t *testing.T) {
	b := mutated(t, "mlp_stats.json", func(d map[string]any) {
		p := param(d, 1, 1)
		p["shape"], p["numel"] = []any{json.Number("1099511627776"), json.Number("1099511627776"), json.Number("0")}, json.Number("0")
		delete(p, "stats")
	})
	b, err := Rehash(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode("d.json", bytes.NewReader(b), Options{}); err != nil {
		t.Fatal(err)
	}
}
