package main

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/model"
)

// --set KEY=VALUE overrides a value of the analysed run's config (its text config for a
// multimodal wrapper) for this command only; the stored run is not changed. It is how a user
// supplies what the dump cannot tell, e.g. the head count of a model dumped without a config.
// The overrides are read from the flags where a run is loaded and passed to loadRun as a value;
// the app's Before refuses malformed ones first, with a usage error.

// configSets is one command's overrides, keys sorted (they enter cache keys).
type configSets struct {
	keys   []string
	values map[string]any
}

// parseSets reads KEY=VALUE pairs. A value that is JSON (a number, true, false, null, a quoted
// string, an array) is taken as JSON; anything else is a string.
func parseSets(list []string) (configSets, error) {
	s := configSets{values: map[string]any{}}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return s, fmt.Errorf("--set %q: want KEY=VALUE, e.g. --set num_attention_heads=12 (a row set shipped with mrep is --rows NAME, on validate and calibrate)", kv)
		}
		var val any = v
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		var j any
		if err := dec.Decode(&j); err == nil && !dec.More() {
			val = j
		}
		if _, dup := s.values[k]; !dup {
			s.keys = append(s.keys, k)
		}
		s.values[k] = val
	}
	sort.Strings(s.keys)
	return s, nil
}

// String is the overrides as one line, for cache keys and notes.
func (s configSets) String() string {
	var parts []string
	for _, k := range s.keys {
		b, _ := json.Marshal(s.values[k])
		parts = append(parts, k+"="+string(b))
	}
	return strings.Join(parts, " ")
}

// apply writes the overrides into d's (text) config, after checking each: a key the config
// does not have is a typo unless it is one mrep reads when a dump lacks it (the error names the
// nearest key), and a size is a whole number in its physical range (an expert count of 0 would
// silently make an MoE dense; 1e300 layers would overflow every count).
func (s configSets) apply(d *model.Dump) error {
	if len(s.keys) == 0 {
		return nil
	}
	cfg := d.TextConfig()
	if cfg == nil {
		d.Config = map[string]any{}
		cfg = d.Config
	}
	for _, k := range s.keys {
		if _, ok := cfg[k]; !ok && !suppliable[k] {
			msg := fmt.Sprintf("--set %s: the config has no key %q", k, k)
			if near := nearestKey(k, cfg); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
			return cli.Exit(msg, exitUsage)
		}
		if err := checkSize(k, s.values[k]); err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		if old, ok := cfg[k]; ok && isNumber(old) && !isNumber(s.values[k]) && s.values[k] != nil {
			return cli.Exit(fmt.Sprintf("--set %s=%s: want a number, as the config's %v is", k, oneLineValue(s.values[k]), old), exitUsage)
		}
		if old, ok := cfg[k]; ok && treeFixed[k] && hasParams(d) && oneLineValue(old) != oneLineValue(s.values[k]) && !sameNumber(old, s.values[k]) {
			// the dump's modules were built with the old value: counting the tree with another in
			// the config reads half of each (8 experts' weights with 4 routed, an MoE read as
			// dense, 61 layers kept under num_hidden_layers=30)
			return cli.Exit(fmt.Sprintf("--set %s=%s: the dump's module tree was built with %s=%s, and --set does not rebuild it (it supplies what a dump cannot tell, such as head counts); to size the model with %s=%s, change its config.json and name that file (mrep matches it to a zoo model or gives the exporter command)",
				k, oneLineValue(s.values[k]), k, oneLineValue(old), k, oneLineValue(s.values[k])), exitUsage)
		}
		cfg[k] = s.values[k]
	}
	// routing more experts per token than a layer has is no model (it read as all of them)
	for _, e := range []string{"num_local_experts", "n_routed_experts", "num_experts"} {
		n, okN := model.ConfigNumber(cfg, e)
		top, okT := model.ConfigNumber(cfg, "num_experts_per_tok")
		if okN && okT && top > n {
			return cli.Exit(fmt.Sprintf("--set: num_experts_per_tok %g is more than %s %g", top, e, n), exitUsage)
		}
	}
	return nil
}

// treeFixed are the config keys a dump's module tree already embodies (depth, widths, expert
// counts and where the MoE layers are): changing one in the config alone contradicts the tree.
var treeFixed = map[string]bool{
	"num_hidden_layers": true, "n_layer": true, "n_layers": true, "hidden_size": true, "n_embd": true, "dim": true,
	"intermediate_size": true, "moe_intermediate_size": true, "shared_expert_intermediate_size": true, "ffn_dim": true,
	"vocab_size": true, "num_local_experts": true, "n_routed_experts": true, "num_experts": true, "n_shared_experts": true,
	"first_k_dense_replace": true, "decoder_sparse_step": true, "moe_layer_freq": true, "mlp_only_layers": true,
	"kv_lora_rank": true, "q_lora_rank": true, "qk_rope_head_dim": true, "qk_nope_head_dim": true, "v_head_dim": true,
}

// sameNumber: a and b are the same number however written (8 and 8.0).
func sameNumber(a, b any) bool {
	x, ok1 := model.ConfigNumber(map[string]any{"v": a}, "v")
	y, ok2 := model.ConfigNumber(map[string]any{"v": b}, "v")
	return ok1 && ok2 && x == y
}

// isNumber says whether a config value is a number (json.Number from --set, float64 from a
// decoded config).
func isNumber(v any) bool {
	switch v.(type) {
	case json.Number, float64, int, int64:
		return true
	}
	return false
}

// oneLineValue is a --set value as an error quotes it: one line, control bytes escaped.
func oneLineValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// suppliable are the keys --set may add to a config that lacks them: what mrep reads for a
// model's shapes when a dump was made without its config.
var suppliable = map[string]bool{"num_attention_heads": true, "n_head": true, "num_key_value_heads": true, "head_dim": true,
	"hidden_size": true, "n_embd": true, "num_hidden_layers": true, "n_layer": true, "intermediate_size": true, "vocab_size": true,
	"max_position_embeddings": true, "sliding_window": true, "model_type": true}

// checkSize: a shape field is a whole number within physical range; counts of experts,
// heads, layers and widths at least 1.
func checkSize(k string, v any) error {
	shape := strings.HasPrefix(k, "num_") || strings.HasPrefix(k, "n_") || strings.HasSuffix(k, "_size") || strings.HasSuffix(k, "_dim") ||
		strings.HasSuffix(k, "_rank") || strings.HasSuffix(k, "_heads") || strings.HasSuffix(k, "_layers") || strings.HasSuffix(k, "_experts") ||
		k == "n_embd" || k == "n_layer" || k == "n_head" || k == "first_k_dense_replace"
	n, ok := v.(json.Number)
	if !ok {
		if shape && v != nil {
			// a count read as text would count as nothing (heads=abc gave attention 0 FLOPs)
			return fmt.Errorf("--set %s=%s: want a whole number", k, oneLineValue(v))
		}
		return nil
	}
	if !shape {
		return nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < 0 || f > 1e7 {
		return fmt.Errorf("--set %s=%s: want a whole number from 0 to 10,000,000", k, n)
	}
	atLeastOne := !(strings.HasPrefix(k, "n_shared") || k == "first_k_dense_replace" || strings.HasSuffix(k, "_rank") || k == "num_nextn_predict_layers")
	if atLeastOne && f < 1 {
		return fmt.Errorf("--set %s=%s: want at least 1 (0 would remove what the model is made of)", k, n)
	}
	return nil
}

// nearestKey is the config key closest to k by edit distance (within a third of its length).
func nearestKey(k string, cfg map[string]any) string {
	best, bestD := "", len(k)/3+1
	keys := make([]string, 0, len(cfg))
	for c := range cfg {
		keys = append(keys, c)
	}
	sort.Strings(keys)
	for _, c := range keys {
		if d := editDistance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// runSets is the command's --set overrides (checkSets has refused malformed ones already).
func runSets(c *cli.Context) configSets {
	s, _ := parseSets(c.StringSlice("set"))
	return s
}

// checkSets refuses malformed --set pairs before any command runs.
func checkSets(c *cli.Context) error {
	if _, err := parseSets(c.StringSlice("set")); err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	return nil
}
