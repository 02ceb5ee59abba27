package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// A lone UTF-16 surrogate escape is refused with the string's place, never read as U+FFFD;
// a proper pair, an escaped backslash before "ud800", and other escapes are text.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	good, err := os.ReadFile("../schemas/testdata/valid/mlp_stats.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		to, want string
	}{
		{`"class": "Lin\ud800ear"`, `lone UTF-16 surrogate (\ud800)`},
		{`"class": "Linear\udc00"`, `lone UTF-16 surrogate (\udc00)`},
		{`"class": "Linear\uD83D"`, `lone UTF-16 surrogate (\ud83d)`},
		{`"class": "Lin\ud800\u0041"`, `lone UTF-16 surrogate (\ud800)`},
		{`"class": "Lin\u0000ear"`, `a NUL character (\u0000)`},
		{`"class": "Lin\ud83d\ude00ear"`, ``},
		{`"class": "Lin\\ud800ear"`, ``},
		{`"class": "Lin\u00e9ar"`, ``},
	} {
		// The hash as mrep computes it (over the decoded text) put into the raw bytes, so
		// that the escape itself reaches the decoder: Rehash would re-encode it as U+FFFD.
		raw := bytes.Replace(good, []byte(`"class": "Linear"`), []byte(c.to), 1)
		re, err := Rehash(raw)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Run struct {
				ContentHash string `json:"content_hash"`
			} `json:"run"`
		}
		if err := json.Unmarshal(re, &doc); err != nil {
			t.Fatal(err)
		}
		old := regexp.MustCompile(`"content_hash": *"[^"]*"`)
		b := old.ReplaceAll(raw, []byte(`"content_hash": "`+doc.Run.ContentHash+`"`))
		_, err = Decode("d.json", bytes.NewReader(b), Options{})
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.to, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "/modules/") {
			t.Errorf("%s: %v, want %q at its module", c.to, err, c.want)
		}
	}
}
