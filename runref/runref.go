// Package runref turns what a user names on the command line into a model dump: a dump file
// on disk (read and checked as `mrep ingest` would, not stored), a run in the database, or a
// model of the zoo shipped in the binary. A Hugging Face config.json is recognised as one: it
// resolves to the zoo model of the same architecture and sizes when there is one, and
// otherwise the error gives the exporter command that turns it into a dump.
package runref

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/store"
)

// Ref is a resolved model: its dump and where it came from.
type Ref struct {
	Dump *model.Dump
	// Run is the stored run (ID > 0) for a database run; for a file or a zoo model it names
	// the model only.
	Run store.Run
	// From says where the dump came from: "database", "file", "zoo", or "config.json" (a
	// Hugging Face config matched to a zoo model).
	From string
	// Note is what a user should know about the resolution (a config.json matched to a zoo
	// model), "" otherwise.
	Note string
}

// ErrNoSuch: nothing by that name in the database or the zoo, and no such file.
var ErrNoSuch = errors.New("no such run, file or zoo model")

// noSuch is an ErrNoSuch that says more precisely what was found instead.
type noSuch string

func (e noSuch) Error() string        { return string(e) }
func (e noSuch) Is(target error) bool { return target == ErrNoSuch }

// ErrHFConfig: the file is a Hugging Face config.json that matches no zoo model.
var ErrHFConfig = errors.New("a Hugging Face config.json, not an mrep dump")

// MaxFile bounds a file read as a config (a config.json is a few KiB).
const MaxFile = 4 << 20

// Resolve finds sel: a path to a file (a dump, .json or .json.gz, or a config.json), then a
// run in db (nil: no database), then a zoo model by name. An empty sel is an error the caller
// words (it lists what there is).
func Resolve(ctx context.Context, db *store.DB, sel string) (Ref, error) {
	if sel == "" {
		return Ref{}, fmt.Errorf("no model named: %w", ErrNoSuch)
	}
	if isFile(sel) {
		return file(sel)
	}
	if name, ok := strings.CutPrefix(sel, "zoo:"); ok { // the zoo's model even where a stored run has its name
		return zoo(name, sel)
	}
	if db != nil {
		id, err := db.Resolve(ctx, sel)
		switch {
		case err == nil:
			run, err := db.Run(ctx, id)
			if err != nil {
				return Ref{}, err
			}
			d, err := db.LoadDump(ctx, id)
			if err != nil {
				return Ref{}, err
			}
			ref := Ref{Dump: d, Run: run, From: "database"}
			// in a shared history one mislabelled run would change everyone's sizing of the zoo
			// model it is named after: say so when the two differ
			if z, ok := examples.Resolve(run.ModelName); ok && strings.EqualFold(z, run.ModelName) {
				if zd, err := examples.Decode(z); err == nil && !sameShape(shape(zd.Config), shape(d.Config)) {
					ref.Note = fmt.Sprintf("%q is stored run %d (%s), not the zoo model %s, whose architecture or sizes differ: the stored run is used; zoo:%s names the zoo's",
						sel, run.ID, fmt.Sprint(d.Config["model_type"]), z, z)
				}
			}
			return ref, nil
		case errors.Is(err, store.ErrAmbiguous):
			return Ref{}, err
		case !errors.Is(err, store.ErrNotFound):
			return Ref{}, err
		}
	}
	if _, ok := examples.Resolve(sel); ok && !strings.ContainsAny(sel, "/\\") {
		return zoo(sel, sel)
	}
	if fi, err := os.Stat(sel); err == nil {
		// something is there, but not a file a model can be read from: say what it is
		what := "not a regular file"
		if fi.IsDir() {
			what = "a directory"
		}
		return Ref{}, noSuch(fmt.Sprintf("%q is %s, not a model (a dump .json/.json.gz or a config.json)", sel, what))
	}
	if hit := examples.Prefixed(sel); len(hit) > 1 && !strings.ContainsAny(sel, "/\\") {
		return Ref{}, noSuch(fmt.Sprintf("%q could be any of %d zoo models: %s (name one)", sel, len(hit), strings.Join(hit, ", ")))
	}
	return Ref{}, fmt.Errorf("%q: %w", sel, ErrNoSuch)
}

// zoo is the zoo model name names (sel as the user wrote it, for the error).
func zoo(name, sel string) (Ref, error) {
	z, ok := examples.Resolve(name)
	if !ok {
		return Ref{}, fmt.Errorf("%q: no zoo model of that name (mrep models lists them): %w", sel, ErrNoSuch)
	}
	d, err := examples.Decode(z)
	if err != nil {
		return Ref{}, fmt.Errorf("zoo model %s: %w", z, err)
	}
	return Ref{Dump: d, Run: store.Run{ModelName: z, SourceKind: "zoo"}, From: "zoo"}, nil
}

// isFile: sel names something on disk (a path, or a name ending in .json/.json.gz that exists).
func isFile(sel string) bool {
	if fi, err := os.Stat(sel); err == nil && fi.Mode().IsRegular() { // a FIFO or device is never read
		return strings.ContainsAny(sel, "/\\") || strings.HasSuffix(sel, ".json") || strings.HasSuffix(sel, ".gz")
	}
	return false
}

// file reads a dump, or recognises a Hugging Face config.json.
func file(path string) (Ref, error) {
	raw, err := readHead(path)
	if err != nil {
		return Ref{}, err
	}
	if cfg, ok := HFConfig(raw); ok {
		return fromConfig(path, cfg)
	}
	if len(raw) == MaxFile && !bytes.Contains(raw, []byte(`"schema_version"`)) && !bytes.Contains(raw, []byte(`"mrep_export"`)) {
		// neither a config (a few KiB) nor a dump by its first MiBs: decoding it whole as a dump
		// would hold hundreds of MiB only to say so
		return Ref{}, fmt.Errorf("%s: %d MiB or more with no schema_version or mrep_export in its first %d MiB: not a dump, and too large for a config.json", path, MaxFile>>20, MaxFile>>20)
	}
	d, err := ingest.ReadFile(path, ingest.Options{})
	if err != nil {
		return Ref{}, err
	}
	return Ref{Dump: d, Run: store.Run{ModelName: d.Model.Name, SourceKind: "file", SourceFile: path}, From: "file"}, nil
}

// readHead reads up to MaxFile bytes of path, gunzipped when it is gzip: enough to tell a
// config.json from a dump (a dump is then read whole by ingest, under its own limit). Only a
// regular file is opened, and without blocking: a FIFO named as a model would wait for ever.
func readHead(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (a model is a dump or a config.json)", path)
	}
	var r io.Reader = f
	var magic [2]byte
	if n, _ := io.ReadFull(f, magic[:]); n == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(r, MaxFile))
}

// HFConfig says whether raw is a Hugging Face config (an object with model_type or
// architectures and no schema_version), and decodes it.
func HFConfig(raw []byte) (map[string]any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		return nil, false
	}
	if _, dump := cfg["schema_version"]; dump {
		return nil, false
	}
	_, mt := cfg["model_type"]
	_, ar := cfg["architectures"]
	return cfg, mt || ar
}

// ID is the Hugging Face id or path a config was loaded from (_name_or_path, else
// name_or_path: "meta-llama/Llama-3.1-8B"), "" when it names none: what a launch command loads.
func ID(cfg map[string]any) string {
	for _, k := range []string{"_name_or_path", "name_or_path"} {
		if s, ok := cfg[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// Name is what a config.json calls its model: its ID's last path element, else the first of
// architectures, else model_type; never the file's stem.
func Name(cfg map[string]any) string {
	if s := strings.TrimRight(ID(cfg), "/\\"); s != "" {
		return s[strings.LastIndexAny(s, "/\\")+1:]
	}
	if a, ok := cfg["architectures"].([]any); ok && len(a) > 0 {
		if s, ok := a[0].(string); ok && s != "" {
			return s
		}
	}
	if s, ok := cfg["model_type"].(string); ok && s != "" {
		return s
	}
	return "model"
}

// shapeKeys are the config fields that fix an architecture's shapes: two configs that agree on
// every one present in either describe the same model to mrep (names and dtypes aside).
var shapeKeys = []string{"model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
	"intermediate_size", "moe_intermediate_size", "vocab_size", "head_dim", "n_routed_experts", "num_experts", "num_local_experts",
	"num_experts_per_tok", "n_shared_experts", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
	"tie_word_embeddings", "sliding_window", "n_layer", "n_embd", "n_head"}

// biasKeys are the config switches that add bias vectors to a model's linear layers: the zoo's
// dumps hold the modules as built, so a config that turns one on is another model (an absent
// switch is off, as in the Hugging Face classes).
var biasKeys = []string{"attention_bias", "mlp_bias"}

// Match finds the zoo model whose config has the same architecture and sizes as cfg (nested
// text_config included), "" when none does.
func Match(cfg map[string]any) string {
	z, _ := match(cfg, true)
	return z
}

// match is Match, with the bias switches compared or (biases false) not; the second result is
// the zoo model's config.
func match(cfg map[string]any, biases bool) (string, map[string]any) {
	want := shape(cfg)
	if len(want) < 3 {
		return "", nil
	}
	names := examples.Names()
	sort.Strings(names)
	for _, n := range names {
		d, err := examples.Decode(n)
		if err != nil {
			continue
		}
		got := shape(d.Config)
		if !sameShape(got, want) {
			continue
		}
		if biases && biasDiff(d.Config, cfg) != "" {
			continue
		}
		return n, d.Config
	}
	return "", nil
}

// flag is a config switch's value, nested text_config included; absent is off.
func flag(cfg map[string]any, k string) bool {
	for _, c := range []map[string]any{cfg, sub(cfg, "text_config")} {
		if v, ok := c[k].(bool); ok {
			return v
		}
	}
	return false
}

// biasDiff says which bias switches cfg sets otherwise than the zoo's config ("" when none).
func biasDiff(zoo, cfg map[string]any) string {
	var diff []string
	for _, k := range biasKeys {
		if a, b := flag(cfg, k), flag(zoo, k); a != b {
			diff = append(diff, fmt.Sprintf("%s: %v (the zoo model's: %v)", k, a, b))
		}
	}
	return strings.Join(diff, ", ")
}

// valueKeys are the config fields mrep reads beyond the shapes: the context (positions, RoPE),
// the checkpoint's precision. A config.json that matches a zoo model's shapes but states one
// of these otherwise is analysed with its own values, and the note names each.
var valueKeys = []string{"max_position_embeddings", "n_positions", "rope_scaling", "rope_theta", "torch_dtype", "dtype", "quantization_config"}

// adoptValues writes cfg's valueKeys into the zoo dump's config where they differ and says
// which, as "key: file's (the zoo model's: zoo's)".
func adoptValues(d *model.Dump, cfg map[string]any) []string {
	var diff []string
	text := sub(cfg, "text_config")
	for _, k := range valueKeys {
		v, ok := cfg[k]
		target := d.Config
		if text != nil {
			if tv, tok := text[k]; tok {
				v, ok, target = tv, true, d.TextConfig()
			}
		} else if _, inText := d.TextConfig()[k]; inText {
			target = d.TextConfig()
		}
		if !ok {
			continue
		}
		old, had := target[k]
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(old)
		if had && string(a) == string(b) {
			continue
		}
		if had { // a value the zoo's dump leaves unstated is supplied without a word
			diff = append(diff, fmt.Sprintf("%s: %s (the zoo model's: %s)", k, a, b))
		}
		target[k] = v
	}
	return diff
}

// aliases are config keys that say the same thing under another name (the exporter writes
// the expert count as num_local_experts whatever the config called it).
var aliases = map[string]string{"num_experts": "experts", "num_local_experts": "experts", "n_routed_experts": "experts",
	"n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads"}

func shape(cfg map[string]any) map[string]string {
	out := map[string]string{}
	for _, c := range []map[string]any{cfg, sub(cfg, "text_config")} {
		for _, k := range shapeKeys {
			if v, ok := c[k]; ok && v != nil {
				key := k
				if a, ok := aliases[k]; ok {
					key = a
				}
				if _, seen := out[key]; !seen {
					out[key] = fmt.Sprint(v)
				}
			}
		}
	}
	return out
}

func sub(cfg map[string]any, key string) map[string]any {
	if m, ok := cfg[key].(map[string]any); ok {
		return m
	}
	return nil
}

// sameShape: every shape field the user's config states has the zoo dump's value (the dump
// writes out fields a config leaves to its class's defaults, such as head_dim; the one such
// default that changes the shapes, the KV heads, is the query heads when unstated).
func sameShape(zoo, cfg map[string]string) bool {
	if _, ok := cfg["num_key_value_heads"]; !ok && cfg["num_attention_heads"] != "" {
		cfg = maps.Clone(cfg)
		cfg["num_key_value_heads"] = cfg["num_attention_heads"]
	}
	for _, k := range []string{"model_type", "hidden_size", "num_hidden_layers", "vocab_size"} {
		if cfg[k] == "" {
			return false // too little said to be sure
		}
	}
	for k, v := range cfg {
		if zv, ok := zoo[k]; !ok || zv != v {
			return false
		}
	}
	return true
}

// fromConfig resolves a config.json to the zoo model of the same shapes, with the file's own
// context and precision where they differ (named in the note), or explains how to export it.
func fromConfig(path string, cfg map[string]any) (Ref, error) {
	name := Name(cfg)
	if z := Match(cfg); z != "" {
		d, err := examples.Decode(z)
		if err != nil {
			return Ref{}, err
		}
		note := fmt.Sprintf("%s is a Hugging Face config.json (%s); the zoo model %s has the same architecture and sizes: using it", path, name, z)
		if diff := adoptValues(d, cfg); len(diff) > 0 {
			note += " with this file's " + strings.Join(diff, ", ")
		}
		return Ref{Dump: d, Run: store.Run{ModelName: z, SourceKind: "zoo"}, From: "config.json", Note: note}, nil
	}
	out := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)) + ".json.gz"
	near := ""
	if z, zc := match(cfg, false); z != "" {
		near = fmt.Sprintf(" (the zoo model %s has its sizes but not its biases: %s)", z, biasDiff(zc, cfg))
	}
	return Ref{}, fmt.Errorf("%s: %w (%s, model_type %v); no zoo model has its architecture and sizes%s (see `mrep models`). Export it with the Python exporter (pip install ./exporter[hf] from a clone of mrep):\n  python -m mrep_export --hf-config %s -o %s\nthen give %s to any mrep command, or `mrep ingest %s` to keep it",
		path, ErrHFConfig, name, cfg["model_type"], near, shell.Quote(path), shell.Quote(out), shell.Quote(out), shell.Quote(out))
}

// ZooModel is one model of the zoo, as `mrep models` lists it.
type ZooModel struct {
	Name         string  `json:"name"`
	ModelType    string  `json:"model_type"`
	Family       string  `json:"family"`
	Params       int64   `json:"params"`
	ActiveParams float64 `json:"active_params_per_token"`
	Layers       int64   `json:"layers"`
	Hidden       int64   `json:"hidden"`
	Attention    string  `json:"attention"`
	Experts      int64   `json:"routed_experts,omitempty"`
	TopK         int64   `json:"top_k,omitempty"`
}

// Zoo lists the zoo's models with their sizes, counted from their dumps.
func Zoo() ([]ZooModel, error) {
	var out []ZooModel
	for _, n := range examples.Names() {
		d, err := examples.Decode(n)
		if err != nil {
			return nil, fmt.Errorf("zoo model %s: %w", n, err)
		}
		m := analyzer.NewModel(d)
		fp := m.Fingerprint
		z := ZooModel{Name: n, ModelType: fp.ModelType, Family: fp.Family, Params: m.TotalParams, ActiveParams: m.Active,
			Layers: fp.Layers, Hidden: fp.Hidden, Attention: fp.Attention}
		if fp.MoE != nil {
			z.Experts, z.TopK = fp.MoE.RoutedExperts, fp.MoE.TopK
		}
		out = append(out, z)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name) })
	return out, nil
}
