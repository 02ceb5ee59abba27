// Package chips is mrep's accelerator database: an embedded data file with a source for every
// figure, plus chips a user adds from a file of the same shape.
package chips

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

//go:embed chips.json
var embedded []byte

// ErrUnknown: no chip of that name or alias.
var ErrUnknown = errors.New("unknown chip")

// ErrNoPeak: the chip has no peak for that dtype (e.g. fp8 on an A100).
var ErrNoPeak = errors.New("no peak for dtype")

// Chip is one accelerator. Units: TFLOP/s (1e12), GB/s (1e9 B/s), GiB for capacity.
type Chip struct {
	Name         string             `json:"name"`
	Aliases      []string           `json:"aliases,omitempty"`
	Vendor       string             `json:"vendor"`
	Title        string             `json:"title"`
	PeakTFLOPs   map[string]float64 `json:"peak_tflops"`
	MemoryGiB    float64            `json:"memory_gib"`
	HBMGBps      float64            `json:"hbm_gbps"`
	ScaleUpGBps  float64            `json:"scale_up_gbps"` // bidirectional headline per chip
	ScaleOutGBps float64            `json:"scale_out_gbps"`
	TDPW         float64            `json:"tdp_w"` // 0: not published
	OnChipMiB    float64            `json:"onchip_mib"`
	Sources      []string           `json:"sources"`
	Notes        string             `json:"notes,omitempty"`
}

// DTypes are the peak keys mrep knows, in display order.
var DTypes = []string{"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"}

// Peak returns the dense peak for dtype in FLOP/s.
func (c Chip) Peak(dtype string) (float64, error) {
	v, ok := c.PeakTFLOPs[dtype]
	if !ok || v <= 0 {
		have := make([]string, 0, len(c.PeakTFLOPs))
		for _, d := range DTypes {
			if c.PeakTFLOPs[d] > 0 {
				have = append(have, d)
			}
		}
		return 0, fmt.Errorf("chip %s has no %s peak (it has %s): %w", c.Name, dtype, strings.Join(have, ", "), ErrNoPeak)
	}
	return v * 1e12, nil
}

// HBMBytesPerSec is memory bandwidth in B/s.
func (c Chip) HBMBytesPerSec() float64 { return c.HBMGBps * 1e9 }

// NetBytesPerSec is the scale-up bandwidth per direction in B/s: half the bidirectional
// headline, because a GPU's sends and receives each get one direction.
func (c Chip) NetBytesPerSec() float64 { return c.ScaleUpGBps * 1e9 / 2 }

// MemoryBytes is the capacity in bytes (GiB).
func (c Chip) MemoryBytes() float64 { return c.MemoryGiB * (1 << 30) }

// OnChipBytes is the on-chip memory that may keep weights resident across steps.
func (c Chip) OnChipBytes() float64 { return c.OnChipMiB * (1 << 20) }

// DB is a set of chips.
type DB struct {
	chips []Chip
	index map[string]int
}

type file struct {
	About string `json:"about,omitempty"`
	Chips []Chip `json:"chips"`
}

// Default returns the embedded database.
func Default() *DB {
	db, err := Parse("chips.json", bytes.NewReader(embedded))
	if err != nil {
		panic(fmt.Sprintf("embedded chips.json: %v", err)) // a build defect, caught by tests
	}
	return db
}

// Parse reads a chips file; name is used in errors.
func Parse(name string, r io.Reader) (*DB, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("chips file %s: %w", name, err)
	}
	db := &DB{index: map[string]int{}}
	for i, c := range f.Chips {
		if err := db.add(c); err != nil {
			return nil, fmt.Errorf("chips file %s: /chips/%d: %w", name, i, err)
		}
	}
	return db, nil
}

func key(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }

func (db *DB) add(c Chip) error {
	if c.Name == "" {
		return errors.New("name is empty")
	}
	if c.HBMGBps <= 0 || c.MemoryGiB <= 0 || c.ScaleUpGBps <= 0 {
		return fmt.Errorf("%s: hbm_gbps, memory_gib and scale_up_gbps must be positive (a chip without NVLink-class links scales up over PCIe)", c.Name)
	}
	if len(c.PeakTFLOPs) == 0 {
		return fmt.Errorf("%s: peak_tflops is empty", c.Name)
	}
	for d, v := range c.PeakTFLOPs {
		if v <= 0 {
			return fmt.Errorf("%s: peak_tflops.%s must be positive", c.Name, d)
		}
	}
	if len(c.Sources) == 0 {
		return fmt.Errorf("%s: every chip needs sources for its figures", c.Name)
	}
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if j, dup := db.index[key(n)]; dup && db.chips[j].Name != c.Name {
			return fmt.Errorf("%s: name or alias %q already belongs to %s", c.Name, n, db.chips[j].Name)
		}
	}
	if j, ok := db.index[key(c.Name)]; ok { // a user file replaces a chip of the same name
		db.chips[j] = c
	} else {
		db.chips = append(db.chips, c)
		j = len(db.chips) - 1
		db.index[key(c.Name)] = j
	}
	j := db.index[key(c.Name)]
	for _, a := range c.Aliases {
		db.index[key(a)] = j
	}
	return nil
}

// Merge adds (or replaces, by name) the chips of other.
func (db *DB) Merge(other *DB) error {
	for _, c := range other.chips {
		if err := db.add(c); err != nil {
			return err
		}
	}
	return nil
}

// Lookup finds a chip by name or alias, case-insensitively.
func (db *DB) Lookup(name string) (Chip, error) {
	if j, ok := db.index[key(name)]; ok {
		return db.chips[j], nil
	}
	names := make([]string, len(db.chips))
	for i, c := range db.chips {
		names[i] = c.Name
	}
	sort.Strings(names)
	return Chip{}, fmt.Errorf("chip %q (known: %s): %w", name, strings.Join(names, ", "), ErrUnknown)
}

// All lists the chips in file order.
func (db *DB) All() []Chip { return append([]Chip(nil), db.chips...) }
