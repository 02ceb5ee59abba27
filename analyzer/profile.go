package analyzer

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// ExecProfile holds the seed's execution knobs. They change bytes (and so time), never F_theory.
type ExecProfile struct {
	Name           string  `json:"name"`
	AttentionBytes string  `json:"attention_bytes"` // naive: score/prob matrices cross HBM; flash: they stay on chip
	WRFAttn        float64 `json:"wrf_attn"`        // weight residency factor: W_eff = W / WRF
	WRFDense       float64 `json:"wrf_dense"`
	WRFMoE         float64 `json:"wrf_moe"`
	ActFusion      float64 `json:"act_fusion"`  // multiplier on GEMM input/output activation bytes
	Elementwise    float64 `json:"elementwise"` // multiplier on elementwise and score/prob temporaries
}

// Naive and Efficient are the seed's two profiles with its defaults. Achievable is what the
// engines behind measured runs execute: flash attention (scores stay on chip), every weight,
// activation and elementwise byte crossing HBM once. It is the default everywhere; the seed's
// profiles stay available by name as sensitivity knobs.
var (
	Naive      = ExecProfile{Name: "naive", AttentionBytes: "naive", WRFAttn: 1, WRFDense: 1, WRFMoE: 1, ActFusion: 1, Elementwise: 1}
	Efficient  = ExecProfile{Name: "efficient", AttentionBytes: "flash", WRFAttn: 4, WRFDense: 4, WRFMoE: 2, ActFusion: 0.5, Elementwise: 0.7}
	Achievable = ExecProfile{Name: "achievable", AttentionBytes: "flash", WRFAttn: 1, WRFDense: 1, WRFMoE: 1, ActFusion: 1, Elementwise: 1}
)

// DefaultProfile is the profile every default output predicts with.
const DefaultProfile = "achievable"

// Profiles are the built-in profiles by name.
var Profiles = map[string]ExecProfile{"naive": Naive, "efficient": Efficient, "achievable": Achievable}

// BuiltinProfiles lists the built-in profiles in display order.
var BuiltinProfiles = []ExecProfile{Achievable, Naive, Efficient}

// Validate checks a profile's knobs.
func (p ExecProfile) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("profile has no name")
	}
	if p.AttentionBytes != "naive" && p.AttentionBytes != "flash" {
		return fmt.Errorf("profile %s: attention_bytes must be naive or flash, got %q", p.Name, p.AttentionBytes)
	}
	for _, k := range []struct {
		n string
		v float64
	}{{"wrf_attn", p.WRFAttn}, {"wrf_dense", p.WRFDense}, {"wrf_moe", p.WRFMoE}} {
		if k.v <= 0 { // below 1 models weights re-read within a step
			return fmt.Errorf("profile %s: %s must be > 0, got %g", p.Name, k.n, k.v)
		}
	}
	if p.ActFusion <= 0 || p.Elementwise < 0 {
		return fmt.Errorf("profile %s: act_fusion must be > 0 and elementwise >= 0", p.Name)
	}
	return nil
}

// WRF is the residency factor the profile applies to a category's weights.
func (p ExecProfile) WRF(c Category) float64 {
	switch c {
	case CatAttention:
		return p.WRFAttn
	case CatRoutedExperts:
		return p.WRFMoE
	}
	return p.WRFDense
}

// ParseProfiles reads user profiles: a JSON object or an array of objects with the fields of
// ExecProfile. name is used in errors.
func ParseProfiles(name string, r io.Reader) ([]ExecProfile, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("profiles %s: %w", name, err)
	}
	var list []ExecProfile
	trimmed := strings.TrimSpace(string(b))
	if strings.HasPrefix(trimmed, "{") {
		var one ExecProfile
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&one); err != nil {
			return nil, fmt.Errorf("profiles %s: %w", name, err)
		}
		list = []ExecProfile{one}
	} else {
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return nil, fmt.Errorf("profiles %s: %w", name, err)
		}
	}
	for i, p := range list {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profiles %s: /%d: %w", name, i, err)
		}
	}
	return list, nil
}
