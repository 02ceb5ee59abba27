package ingest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecode: decode+validate never panics, and whatever it accepts passes the semantic
// checks and survives a re-encode unchanged in meaning; and the fast path (taken here from two
// modules on) never disagrees with the reference path. Seeded from schemas/testdata.
//
//	go test ./ingest -run '^$' -fuzz FuzzDecode -fuzztime 60s
func FuzzDecode(f *testing.F) {
	idx := loadCases(f)
	for _, name := range idx.Valid {
		b, err := os.ReadFile(filepath.Join(fixtures, "valid", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(gz(f, b))
	}
	for _, c := range idx.Invalid {
		b, err := os.ReadFile(filepath.Join(fixtures, c.File))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	defer func(n int) { minFastModules = n }(minFastModules)
	minFastModules = 2
	f.Fuzz(func(t *testing.T, data []byte) {
		if plain, err := readAll("fuzz.json", bytes.NewReader(data), 1<<20); err == nil {
			ref, refErr := referenceDecode("fuzz.json", plain)
			fast, fastErr := fastDecode(plain)
			if fastErr == nil && (refErr != nil || !reflect.DeepEqual(ref, fast)) {
				t.Fatalf("the fast path accepted what the reference path decodes otherwise (%v)", refErr)
			}
		}
		d, err := Decode("fuzz.json", bytes.NewReader(data), Options{MaxBytes: 1 << 20})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error is %T, not *ingest.Error: %v", err, err)
			}
			return
		}
		if p := Check(d); p != nil {
			t.Fatalf("accepted a dump that fails its own checks: %s %s", p.Pointer, p.Msg)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		// Go re-encodes numbers and optional fields its own way: same meaning, other bytes, so
		// the re-encoded dump needs its hash recomputed to be accepted.
		if again, err = Rehash(again); err != nil {
			t.Fatal(err)
		}
		d2, err := Decode("again.json", bytes.NewReader(again), Options{})
		if err != nil {
			t.Fatalf("re-encoded dump rejected: %v", err)
		}
		if d2.Model.Name != d.Model.Name || len(d2.Modules) != len(d.Modules) {
			t.Fatal("re-encoded dump differs")
		}
	})
}
