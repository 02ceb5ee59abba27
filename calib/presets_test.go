package calib

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// releasePreset is one preset of calib/sources/transcribed/megatron_bridge_release_configs.json,
// as far as a row's settings come from it.
type releasePreset struct {
	Release, Tag, Preset, Model, Chip, Precision string
	GPUs, TP, PP, CP, EP, MBS, GBS               int64
	VP                                           *int64
	RecomputeGranularity                         *string  `json:"recompute_granularity"`
	RecomputeModules                             []string `json:"recompute_modules"`
	RecomputeNumLayers                           *int64   `json:"recompute_num_layers"`
	CPUOffloadingNumLayers                       int64    `json:"cpu_offloading_num_layers"`
	Backend                                      *string  `json:"moe_flex_dispatcher_backend"`
	A2A                                          bool     `json:"overlap_moe_expert_parallel_comm"`
	FSDP                                         bool     `json:"use_megatron_fsdp"`
}

// releasePresets reads the transcription of every release tag's presets.
func releasePresets(t *testing.T) (doc struct{ Presets []releasePreset }) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("sources", "transcribed", "megatron_bridge_release_configs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Every held-out row that cites a release preset carries that preset's layout and settings:
// the transcription and the rows cannot drift apart, and a row never takes a preset of another
// layout.
func TestHeldOutRowsCarryTheirReleasePreset(t *testing.T) {
	doc := releasePresets(t)
	byKey := map[string]releasePreset{}
	for _, p := range doc.Presets {
		byKey[p.Release+"|"+p.Tag+"|"+p.Preset] = p
	}
	cite := regexp.MustCompile(`settings of the (\S+) perf preset (\S+) \(\S+ @(\S+) `)
	release := regexp.MustCompile(`^MB(\d\d\.\d\d(?:\.\d\d)?)-`)
	cited := 0
	for _, r := range HeldOutTraining() {
		m := cite.FindStringSubmatch(r.Note)
		if m == nil {
			continue
		}
		cited++
		p, ok := byKey[m[1]+"|"+m[3]+"|"+m[2]]
		if !ok {
			t.Errorf("%s cites %s %s @%s, not in the transcription", r.ID, m[1], m[2], m[3])
			continue
		}
		if rel := release.FindStringSubmatch(r.ID); rel == nil || rel[1] != p.Release {
			t.Errorf("%s takes a preset of release %s", r.ID, p.Release)
		}
		vp := int64(1)
		if p.VP != nil {
			vp = *p.VP
		}
		// a batch no preset states is the perf scripts' -gb override of a preset of the row's
		// layout, and the note says so
		batch := p.GBS == r.GBS || p.GBS*r.GPUs == r.GBS*p.GPUs ||
			(p.GPUs == r.GPUs && strings.Contains(r.Note, "their settings at the batch the perf scripts take as -gb"))
		if p.TP != r.TP || p.PP != r.PP || p.CP != r.CP || vp != max(r.VP, 1) || p.EP != max(r.EP, 1) || p.MBS != r.MBS || !batch {
			t.Errorf("%s (TP%d PP%d CP%d VP%d EP%d MBS%d GBS%d on %d) takes %s of another layout (TP%d PP%d CP%d VP%d EP%d MBS%d GBS%d on %d)",
				r.ID, r.TP, r.PP, r.CP, r.VP, r.EP, r.MBS, r.GBS, r.GPUs, p.Preset, p.TP, p.PP, p.CP, vp, p.EP, p.MBS, p.GBS, p.GPUs)
		}
		if !strings.EqualFold(p.Chip, strings.TrimSuffix(r.Chip, "-SXM")) {
			t.Errorf("%s on %s takes a %s preset", r.ID, r.Chip, p.Chip)
		}
		want := ""
		if p.Backend != nil && !strings.Contains(r.Note, "DeepEP dispatcher is not in this release's container") {
			want = *p.Backend
		}
		if r.Dispatcher != want {
			t.Errorf("%s dispatcher %q, its preset %s says %q", r.ID, r.Dispatcher, p.Preset, want)
		}
		if (r.A2AOverlap == "1f1b") != p.A2A {
			t.Errorf("%s a2a overlap %q, its preset %s %v", r.ID, r.A2AOverlap, p.Preset, p.A2A)
		}
		if r.OffloadActivations != p.CPUOffloadingNumLayers {
			t.Errorf("%s offloads %d layers, its preset %d", r.ID, r.OffloadActivations, p.CPUOffloadingNumLayers)
		}
		switch {
		case p.RecomputeNumLayers != nil:
			if r.Recompute != "full" || r.RecomputeLayers != *p.RecomputeNumLayers {
				t.Errorf("%s recompute %q %d, its preset full %d", r.ID, r.Recompute, r.RecomputeLayers, *p.RecomputeNumLayers)
			}
		case len(p.RecomputeModules) > 0:
			if r.Recompute != "selective:"+strings.Join(p.RecomputeModules, ",") {
				t.Errorf("%s recompute %q, its preset %v", r.ID, r.Recompute, p.RecomputeModules)
			}
		case p.RecomputeGranularity != nil && *p.RecomputeGranularity == "selective" && p.RecomputeModules == nil:
			if r.Recompute != "selective" { // Megatron's default module, core_attn
				t.Errorf("%s recompute %q, its preset selective (default modules)", r.ID, r.Recompute)
			}
		default: // no recompute, or an empty module list
			if r.Recompute != "" {
				t.Errorf("%s recompute %q, its preset none", r.ID, r.Recompute)
			}
		}
		if (r.ZeRO == 3) != p.FSDP {
			t.Errorf("%s ZeRO %d, its preset Megatron FSDP %v", r.ID, r.ZeRO, p.FSDP)
		}
	}
	// 26.02-26.06.01 held-out rows whose layout a release preset ran: far more than a handful
	if cited < 80 {
		t.Errorf("%d held-out rows cite a release preset, want at least 80", cited)
	}
}

// A row whose release's presets of its layout differ in some setting (26.04.01's v0.4.1 and
// v0.4.2 on the MoE dispatcher) carries what they agree on and nothing they differ on: each
// preset it names is in the transcription at its layout, they do differ on the dispatcher, and
// the row's dispatcher, all-to-all overlap and recompute are theirs where they agree.
func TestRowsTakeWhatTheirReleasesPresetsAgreeOn(t *testing.T) {
	doc := releasePresets(t)
	named := regexp.MustCompile(`([A-Z0-9_]+) @(v[0-9.]+) [0-9a-f]{8}`)
	agreed := regexp.MustCompile(`what they agree on applied \(([^)]*)\); they differ on ([a-z_, ]+)`)
	n := 0
	for _, r := range HeldOutTraining() {
		m := agreed.FindStringSubmatch(r.Note)
		if m == nil {
			continue
		}
		n++
		var ps []releasePreset
		for _, c := range named.FindAllStringSubmatch(r.Note, -1) {
			for _, p := range doc.Presets {
				if p.Preset == c[1] && p.Tag == c[2] && p.TP == r.TP && p.PP == r.PP && p.EP == max(r.EP, 1) && p.MBS == r.MBS {
					ps = append(ps, p)
				}
			}
		}
		if len(ps) < 2 {
			t.Fatalf("%s names %d presets of its layout in the transcription, want 2 or more: %s", r.ID, len(ps), r.Note)
		}
		backend := func(p releasePreset) string {
			if p.Backend == nil {
				return ""
			}
			return *p.Backend
		}
		same := func(f func(releasePreset) string) (string, bool) {
			for _, p := range ps[1:] {
				if f(p) != f(ps[0]) {
					return "", false
				}
			}
			return f(ps[0]), true
		}
		if _, ok := same(backend); ok || !strings.Contains(m[2], "dispatcher") {
			t.Errorf("%s: its presets agree on the dispatcher, or the note does not say they differ: %s", r.ID, r.Note)
		}
		if r.Dispatcher != "" {
			t.Errorf("%s takes dispatcher %q its presets disagree on", r.ID, r.Dispatcher)
		}
		a2a, _ := same(func(p releasePreset) string { return fmt.Sprint(p.A2A) })
		if (r.A2AOverlap == "1f1b") != (a2a == "true") || strings.Contains(m[1], "a2a_overlap") != (a2a == "true") {
			t.Errorf("%s all-to-all overlap %q, its presets agree on %s", r.ID, r.A2AOverlap, a2a)
		}
		rc, _ := same(func(p releasePreset) string { return strings.Join(p.RecomputeModules, ",") })
		if rc != "" && r.Recompute != "selective:"+rc {
			t.Errorf("%s recompute %q, its presets agree on %s", r.ID, r.Recompute, rc)
		}
	}
	if n < 3 {
		t.Errorf("%d rows take what their release's presets agree on, want the 3 of 26.04.01", n)
	}
}
