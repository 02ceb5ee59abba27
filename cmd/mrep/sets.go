package main

import (
	"encoding/json"
	"fmt"
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
			return s, fmt.Errorf("--set %q: want KEY=VALUE, e.g. --set num_attention_heads=12", kv)
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

// apply writes the overrides into d's (text) config.
func (s configSets) apply(d *model.Dump) {
	if len(s.keys) == 0 {
		return
	}
	cfg := d.TextConfig()
	if cfg == nil {
		d.Config = map[string]any{}
		cfg = d.Config
	}
	for _, k := range s.keys {
		cfg[k] = s.values[k]
	}
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
