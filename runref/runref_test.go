package runref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/store"
)

// A zoo name, a prefix of one, a dump file and a config.json of a zoo architecture all resolve
// without a database; a config.json of another architecture says what to run; a stored run of
// the same name wins over the zoo.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	r, err := Resolve(ctx, nil, "Llama-3.1-70B")
	if err != nil || r.From != "zoo" || r.Dump.Model.Name != "Llama-3.1-70B-Instruct" {
		t.Fatalf("zoo prefix: %+v %v", r.Run, err)
	}
	r, err = Resolve(ctx, nil, "../examples/dumps/gpt2.json.gz")
	if err != nil || r.From != "file" || r.Dump.Model.Name != "gpt2" {
		t.Fatalf("dump file: %+v %v", r.Run, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile("../examples/configs/Qwen3-30B-A3B.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cfg, raw, 0o644)
	r, err = Resolve(ctx, nil, cfg)
	if err != nil || r.From != "config.json" || r.Run.ModelName != "Qwen3-30B-A3B" || !strings.Contains(r.Note, "same architecture and sizes") {
		t.Fatalf("config.json of a zoo architecture: %+v %v", r, err)
	}
	// one size changed: no zoo model; the error gives the exporter command, quoted for a shell
	other := strings.Replace(string(raw), `"num_hidden_layers": 48`, `"num_hidden_layers": 20`, 1)
	other = strings.Replace(other, "{", `{"_name_or_path": "acme/my model;rm -rf",`, 1)
	odd := filepath.Join(dir, "my config.json")
	os.WriteFile(odd, []byte(other), 0o644)
	_, err = Resolve(ctx, nil, odd)
	if !errors.Is(err, ErrHFConfig) || !strings.Contains(err.Error(), "python -m mrep_export --hf-config '"+odd+"' -o 'my model;rm -rf.json.gz'") {
		t.Fatalf("config.json of another architecture: %v", err)
	}
	if _, err := Resolve(ctx, nil, "no-such-model-anywhere"); !errors.Is(err, ErrNoSuch) {
		t.Errorf("unknown name: %v", err)
	}
	// a file too large for a config and not a dump by its head is refused before it is decoded
	// (a 100 MB config.json was read whole as a dump: 447 MiB)
	huge := filepath.Join(dir, "huge.json")
	os.WriteFile(huge, []byte(`{"pad": "`+strings.Repeat("x", MaxFile)+`", "model_type": "llama"}`), 0o644)
	if _, err := Resolve(ctx, nil, huge); err == nil || !strings.Contains(err.Error(), "not a dump, and too large for a config.json") {
		t.Errorf("a config.json of %d MiB: %v", MaxFile>>20, err)
	}
	// an ambiguous short name lists what it could mean; a directory says it is one
	if _, err := Resolve(ctx, nil, "Qwen3"); !errors.Is(err, ErrNoSuch) || !strings.Contains(err.Error(), "Qwen3-8B") {
		t.Errorf("ambiguous zoo prefix: %v", err)
	}
	if _, err := Resolve(ctx, nil, dir); !errors.Is(err, ErrNoSuch) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	// a stored run of the zoo's name is the user's: it wins
	dbPath := filepath.Join(dir, "r.db")
	if _, _, err := load.Files(ctx, dbPath, []string{"../examples/dumps/Llama-3.1-8B-mha.json.gz"}, load.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, dbPath, store.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err = Resolve(ctx, db, "Llama-3.1-8B")
	if err != nil || r.From != "database" || r.Run.ID == 0 {
		t.Fatalf("stored run: %+v %v", r.Run, err)
	}
	// the stored run (multi-head attention) is not the zoo's Llama-3.1-8B (grouped-query): said,
	// and zoo: names the zoo's
	if !strings.Contains(r.Note, `"Llama-3.1-8B" is stored run 1`) || !strings.Contains(r.Note, "zoo:Llama-3.1-8B names the zoo's") {
		t.Errorf("a stored run shadowing a zoo model of another shape: note %q", r.Note)
	}
	if z, err := Resolve(ctx, db, "zoo:Llama-3.1-8B"); err != nil || z.From != "zoo" || z.Dump.Model.Name != "Llama-3.1-8B" {
		t.Errorf("zoo:Llama-3.1-8B: %+v %v", z.Run, err)
	}
	if _, err := Resolve(ctx, db, "zoo:No-Such"); !errors.Is(err, ErrNoSuch) {
		t.Errorf("zoo:No-Such: %v", err)
	}
	r, err = Resolve(ctx, db, "Qwen2.5-7B")
	if err != nil || r.From != "zoo" {
		t.Fatalf("zoo model beside a database: %+v %v", r.Run, err)
	}
}

// A config names its model from _name_or_path, then architectures, then model_type, never the
// file's stem.
// A config.json of a zoo model's sizes is that model with the file's own context and precision,
// each difference named; one that turns on biases the zoo's modules lack is another model, and
// the error names the near zoo model and the switch.
func TestConfigMatchNamesWhatDiffers(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile("../examples/configs/Llama-3.1-8B.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	write := func(name string, edit func(map[string]any)) string {
		c := maps.Clone(cfg)
		edit(c)
		b, _ := json.Marshal(c)
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short := write("config.json", func(c map[string]any) {
		c["max_position_embeddings"] = 1024
		c["quantization_config"] = map[string]any{"quant_method": "fp8"}
	})
	r, err := Resolve(ctx, nil, short)
	if err != nil || r.Run.ModelName != "Llama-3.1-8B" {
		t.Fatalf("%+v %v", r.Run, err)
	}
	if !strings.Contains(r.Note, "max_position_embeddings: 1024 (the zoo model's: 131072)") {
		t.Errorf("note %q does not name the context", r.Note)
	}
	if got := fmt.Sprint(r.Dump.TextConfig()["max_position_embeddings"]); got != "1024" {
		t.Errorf("the file's context was not used: %s", got)
	}
	if q, _ := r.Dump.Config["quantization_config"].(map[string]any); q["quant_method"] != "fp8" {
		t.Errorf("the file's quantization was not used: %v", r.Dump.Config["quantization_config"])
	}
	zoo, err := Resolve(ctx, nil, "Llama-3.1-8B")
	if err != nil || fmt.Sprint(zoo.Dump.TextConfig()["max_position_embeddings"]) != "131072" {
		t.Errorf("the zoo's own model changed: %v %v", zoo.Dump.TextConfig()["max_position_embeddings"], err)
	}
	biased := write("config.json", func(c map[string]any) { c["attention_bias"] = true })
	_, err = Resolve(ctx, nil, biased)
	if !errors.Is(err, ErrHFConfig) || !strings.Contains(err.Error(), "the zoo model Llama-3.1-8B has its sizes but not its biases: attention_bias: true (the zoo model's: false)") {
		t.Errorf("a biased config: %v", err)
	}
	same := write("config.json", func(c map[string]any) { c["attention_bias"] = false })
	if r, err := Resolve(ctx, nil, same); err != nil || r.Run.ModelName != "Llama-3.1-8B" || strings.Contains(r.Note, "with this file's") {
		t.Errorf("the zoo's own config: %+v %q %v", r.Run, r.Note, err)
	}
}

func TestName(t *testing.T) {
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"_name_or_path": "meta-llama/Llama-3.1-8B/", "architectures": []any{"LlamaForCausalLM"}}, "Llama-3.1-8B"},
		{map[string]any{"name_or_path": "Qwen3-8B"}, "Qwen3-8B"},
		{map[string]any{"architectures": []any{"Gemma3ForCausalLM"}, "model_type": "gemma3"}, "Gemma3ForCausalLM"},
		{map[string]any{"model_type": "phi3"}, "phi3"},
	} {
		if got := Name(c.cfg); got != c.want {
			t.Errorf("%v: %q, want %q", c.cfg, got, c.want)
		}
	}
	if _, ok := HFConfig([]byte(`{"schema_version": 2, "model_type": "llama"}`)); ok {
		t.Error("a dump is not a config")
	}
	if _, ok := HFConfig([]byte(`[1,2]`)); ok {
		t.Error("an array is not a config")
	}
}

// The zoo lists every bundled model with its counted size (Llama-3.1-8B: 8,030,261,248, the
// published count).
func TestZoo(t *testing.T) {
	zoo, err := Zoo()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, z := range zoo {
		if z.Name == "Llama-3.1-8B" {
			found = z.Params == 8030261248 && z.Layers == 32 && z.Experts == 0
		}
	}
	if !found || len(zoo) < 15 {
		t.Errorf("zoo: %d models, Llama-3.1-8B right: %v", len(zoo), found)
	}
}

// The zoo's parameter counts against the figures their model cards and reports publish, to the
// published rounding (examples/configs/README.md): total and, for MoE, active per token (the
// cards' active counts leave out the embeddings or not, so those get half a billion more).
func TestZooParamCounts(t *testing.T) {
	zoo, err := Zoo()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ZooModel{}
	for _, z := range zoo {
		got[z.Name] = z
	}
	for _, c := range []struct {
		name          string
		total, active float64 // published, in billions (0: not published separately)
		digits        float64 // the published figure's last digit, in billions
	}{
		{"Llama-3.2-3B-Instruct", 3.21, 0, 0.01},
		{"Llama-4-Maverick-17B-128E-Instruct", 400, 17, 1},
		{"Qwen2.5-3B", 3.09, 0, 0.01},
		{"Qwen2.5-14B", 14.7, 0, 0.1},
		{"Qwen3-0.6B", 0.6, 0, 0.1},
		{"Qwen3-1.7B", 1.7, 0, 0.1},
		{"Qwen3-4B", 4.0, 0, 0.1},
		{"Qwen3-8B", 8.2, 0, 0.1},
		{"Qwen3-14B", 14.8, 0, 0.1},
		{"Qwen3-32B", 32.8, 0, 0.1},
		{"Qwen3-Coder-480B-A35B-Instruct", 480, 35, 1},
		{"DeepSeek-R1", 671, 37, 1},
		{"Mixtral-8x22B-v0.1", 141, 39, 1},
		{"gemma-2-2b", 2.61, 0, 0.01},
		{"gemma-2-9b", 9.24, 0, 0.01},
		{"gemma-2-27b", 27.2, 0, 0.1},
		{"gemma-3-1b-it", 1, 0, 0.1},
		{"gemma-3-4b-it", 4.3, 0, 0.1},
		{"gemma-3-27b-it", 27.4, 0, 0.1},
		{"phi-4", 14.7, 0, 0.1},
		{"gpt-oss-20b", 21, 0, 1},
		{"Kimi-K2-Instruct", 1000, 0, 50},
	} {
		z, ok := got[c.name]
		if !ok {
			t.Errorf("%s is not in the zoo", c.name)
			continue
		}
		// cards round or truncate: the count lies within half a digit below and one digit above
		if d := float64(z.Params)/1e9 - c.total; d >= c.digits || d < -c.digits/2-1e-9 {
			t.Errorf("%s: %d parameters, published %gB", c.name, z.Params, c.total)
		}
		if c.active > 0 {
			if d := z.ActiveParams/1e9 - c.active; d > c.digits/2+0.5 || d < -c.digits/2-0.5 {
				t.Errorf("%s: %.3gB active per token, published %gB", c.name, z.ActiveParams/1e9, c.active)
			}
		}
	}
	if n := len(zoo) - 4; n < 40 { // the tiny traced models and the MHA variant are not zoo entries
		t.Errorf("%d real models in the zoo, want at least 40", n)
	}
}
