package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../schemas/testdata"

type fixtureCase struct {
	File    string `json:"file"`
	Layer   string `json:"layer"`
	Pointer string `json:"pointer"`
	What    string `json:"what"`
}

type fixtureIndex struct {
	Valid   []string      `json:"valid"`
	Invalid []fixtureCase `json:"invalid"`
}

func loadCases(t testing.TB) fixtureIndex {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx fixtureIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Valid) == 0 || len(idx.Invalid) < 15 {
		t.Fatalf("cases.json lists %d valid and %d invalid fixtures", len(idx.Valid), len(idx.Invalid))
	}
	return idx
}

func TestValidFixtures(t *testing.T) {
	for _, name := range loadCases(t).Valid {
		t.Run(name, func(t *testing.T) {
			d, err := ReadFile(filepath.Join(fixtures, "valid", name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Run.ContentHash == "" || len(d.Modules) == 0 || d.Modules[0].Name != "" {
				t.Fatalf("decoded dump lacks hash or root: %+v", d.Run)
			}
		})
	}
}

// The same fixtures the Python tests reject, rejected here at the same JSON pointer.
func TestInvalidFixturesAtTheirPointer(t *testing.T) {
	for _, c := range loadCases(t).Invalid {
		t.Run(c.File, func(t *testing.T) {
			path := filepath.Join(fixtures, c.File)
			_, err := ReadFile(path, Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *ingest.Error, got %v", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("want ErrInvalid, got %v", err)
			}
			// The validators may name the offending property itself (".../params/0/color")
			// where cases.json names its object; at or under the pointer is the contract.
			if !e.HasPtr || !underPointer(e.Pointer, c.Pointer) {
				t.Errorf("pointer %q (has %v), want at or under %q: %v", e.Pointer, e.HasPtr, c.Pointer, err)
			}
			if e.File != path || !strings.HasPrefix(err.Error(), path+": at ") {
				t.Errorf("error does not name the file first: %v", err)
			}
			if c.Layer == "schema" && !strings.Contains(e.Msg, "schema") && c.File != "invalid/schema_version.json" {
				t.Errorf("schema-layer case reported as %q", e.Msg)
			}
		})
	}
}

func valid(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "valid", "mlp_stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BombGzip is a gzip stream of n MiB of zeros: one compressed MiB repeated as n gzip members,
// which readers concatenate (RFC 1952 multi-member), so 1 GiB costs a millisecond to build.
func BombGzip(t testing.TB, n int) []byte {
	member := gz(t, make([]byte, 1<<20))
	return bytes.Repeat(member, n)
}

func TestDecodeRejects(t *testing.T) {
	good := valid(t)
	cases := []struct {
		name    string
		data    []byte
		opt     Options
		ptr     string // "" with hasPtr false: not a place in the JSON
		hasPtr  bool
		sent    error
		message string
	}{
		{"empty", nil, Options{}, "", false, ErrInvalid, "empty file"},
		{"whitespace", []byte(" \n\t"), Options{}, "", false, ErrInvalid, "empty file"},
		{"truncated json", good[:len(good)/2], Options{}, "", false, ErrInvalid, "ends early"},
		{"truncated gzip", gz(t, good)[:200], Options{}, "", false, ErrInvalid, "gzip"},
		{"gzip header only", []byte{0x1f, 0x8b}, Options{}, "", false, ErrInvalid, "gzip"},
		{"binary garbage", []byte("\x00\x01\x02\xff\xfe garbage"), Options{}, "", false, ErrInvalid, "invalid JSON at line 1"},
		{"not an object", []byte("[1, 2, 3]"), Options{}, "", true, ErrInvalid, "schema"},
		{"trailing data", append(append([]byte{}, good...), []byte("{}")...), Options{}, "", false, ErrInvalid, "after the JSON document"},
		{"NaN literal", bytes.Replace(good, []byte(`"mean": `), []byte(`"mean": NaN, "x": `), 1), Options{}, "", false, ErrInvalid, "invalid JSON"},
		{"deep nesting", []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)), Options{}, "", false, ErrInvalid, "deeper than"},
		{"beyond int64", bytes.Replace(good, []byte(`"numel": 32`), []byte(`"numel": 123456789012345678901234567890`), 1), Options{}, "/modules/1/params/0/numel", true, ErrInvalid, "schema"},
		{"float numel", bytes.Replace(good, []byte(`"numel": 32`), []byte(`"numel": 32.5`), 1), Options{}, "/modules/1/params/0/numel", true, ErrInvalid, "schema"},
		{"too large plain", good, Options{MaxBytes: 100}, "", false, ErrTooLarge, "larger than 100 bytes"},
		{"33-digit number", bytes.Replace(good, []byte(`"numel": 32`), []byte(`"numel": 123456789012345678901234567890123`), 1), Options{}, "/modules/1/params/0/numel", true, ErrInvalid, "a number literal of 33 characters"},
		{"integer-valued float", bytes.Replace(good, []byte(`"numel": 32`), []byte(`"numel": 32.0`), 1), Options{}, "/modules/1/params/0/numel", true, ErrInvalid, "expected an integer, got the number 32.0"},
		{"duplicate key", bytes.Replace(good, []byte(`"numel": 32`), []byte(`"numel": 32, "numel": 64`), 1), Options{}, "/modules/1/params/0/numel", true, ErrInvalid, `duplicate key "numel"`},
		{"invalid UTF-8 in a name", bytes.Replace(good, []byte(`"name": "mlp"`), []byte("\"name\": \"ml\xffp\""), 1), Options{}, "/model/name", true, ErrInvalid, "not valid UTF-8"},
		{"UTF-8 BOM", append([]byte{0xEF, 0xBB, 0xBF}, good...), Options{}, "", false, ErrInvalid, "byte-order mark"},
		{"UTF-16", utf16le(good), Options{}, "", false, ErrInvalid, "UTF-16"},
		{"zip", []byte("PK\x03\x04rest"), Options{}, "", false, ErrInvalid, "zip archive"},
		{"bzip2", []byte("BZh91AY&SY"), Options{}, "", false, ErrInvalid, "bzip2"},
		{"xz", []byte{0xFD, '7', 'z', 'X', 'Z', 0, 1, 2}, Options{}, "", false, ErrInvalid, "xz"},
		{"double gzip", gz(t, gz(t, good)), Options{}, "", false, ErrInvalid, "gzip inside gzip"},
		{"gzip bomb 1 GiB", BombGzip(t, 1024), Options{MaxBytes: 8 << 20}, "", false, ErrTooLarge, "once decompressed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("dump.json", bytes.NewReader(c.data), c.opt)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *ingest.Error, got %v", err)
			}
			if !errors.Is(err, c.sent) {
				t.Errorf("want %v, got %v", c.sent, err)
			}
			if e.HasPtr != c.hasPtr || (c.hasPtr && e.Pointer != c.ptr) {
				t.Errorf("pointer %q (has %v), want %q (has %v)", e.Pointer, e.HasPtr, c.ptr, c.hasPtr)
			}
			if !strings.Contains(err.Error(), c.message) || !strings.HasPrefix(err.Error(), "dump.json: ") {
				t.Errorf("error %q does not name the file and say %q", err, c.message)
			}
		})
	}
}

func TestGzipIsSniffedNotNamed(t *testing.T) {
	d, err := Decode("plain-name.json", bytes.NewReader(gz(t, valid(t))), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Model.Name != "mlp" {
		t.Fatalf("model name %q", d.Model.Name)
	}
}

func TestMissingFileNamesIt(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "absent.json"), Options{})
	if err == nil || !strings.Contains(err.Error(), "absent.json: cannot open") {
		t.Fatalf("got %v", err)
	}
}

func TestPosition(t *testing.T) {
	data := []byte("{\n  \"a\": x\n}")
	if got := position(data, 9); got != "line 2, column 8" {
		t.Fatalf("position = %q", got)
	}
}

func underPointer(got, want string) bool {
	return got == want || strings.HasPrefix(got, want+"/")
}

func utf16le(b []byte) []byte {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, c, 0)
	}
	return out
}
