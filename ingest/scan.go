package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// MaxConfigBytes bounds the model config: real config.json files are a few KiB (DeepSeek-V3's
// is 1.7 KiB); a config of hundreds of MB is an attack on memory, rejected before decoding.
const MaxConfigBytes = 4 << 20

// MaxNumberLen bounds a number literal: real dumps need at most 20 digits (int64) or a
// float's 17 significant digits and exponent; a longer literal is rejected before any decoder
// or validator spends time on it (big-number arithmetic is not linear).
const MaxNumberLen = 32

// scanProblem is a lexical defect found before decoding.
type scanProblem struct {
	ptr    string
	hasPtr bool
	msg    string
}

type frame struct {
	obj      bool
	key      string
	idx      int
	few      []string            // an object's keys while they are few (linear search beats a map)
	keys     map[string]struct{} // ... and once they are many
	needKey  bool                // object: the next string is a key
	afterKey bool                // object: a key was read, its value not yet
}

// seen records key and says whether the object had it already.
func (f *frame) seen(key string) bool {
	if f.keys == nil {
		for _, k := range f.few {
			if k == key {
				return true
			}
		}
		if len(f.few) < 16 {
			f.few = append(f.few, key)
			return false
		}
		f.keys = make(map[string]struct{}, 32)
		for _, k := range f.few {
			f.keys[k] = struct{}{}
		}
	}
	if _, dup := f.keys[key]; dup {
		return true
	}
	f.keys[key] = struct{}{}
	return false
}

// scanner walks JSON bytes once, keeping the JSON pointer of the value under it, to find what
// decoders accept silently or slowly: nesting beyond a depth, number literals beyond
// MaxNumberLen, invalid UTF-8 in strings, and duplicate object keys (Go keeps the last one).
// It stops quietly at anything malformed: the decoder reports syntax errors with positions.
type scanner struct {
	data    []byte
	stack   []frame
	problem *scanProblem // found by valueDone
	// target: report the pointer of the value spanning this offset (pointerAt)
	target int
	found  string
	hit    bool
}

func (s *scanner) pointer() string {
	var parts []any
	for _, f := range s.stack {
		if f.obj {
			if f.afterKey || !f.needKey {
				parts = append(parts, f.key)
			}
		} else {
			parts = append(parts, f.idx)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return pointer(parts...)
}

// valueDone is called after a complete value ending at end that started at start.
func (s *scanner) valueDone(start, end int) {
	if len(s.stack) == 1 && s.stack[0].obj && s.stack[0].key == "config" && end-start > MaxConfigBytes && s.problem == nil {
		s.problem = &scanProblem{ptr: "/config", hasPtr: true, msg: fmt.Sprintf("the config is %d bytes, more than %d: not a model config", end-start, MaxConfigBytes)}
	}
	if s.target >= 0 && !s.hit && s.target >= start && s.target <= end {
		s.found, s.hit = s.pointer(), true
	}
	if n := len(s.stack); n > 0 && s.stack[n-1].obj {
		s.stack[n-1].afterKey = false
	}
}

func (s *scanner) run(maxDepth int) *scanProblem {
	d := s.data
	starts := []int{}
	i := 0
	for i < len(d) {
		if s.problem != nil {
			return s.problem
		}
		c := d[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case ',':
			if n := len(s.stack); n > 0 {
				f := &s.stack[n-1]
				if f.obj {
					f.needKey = true
				} else {
					f.idx++
				}
			}
			i++
		case '{', '[':
			if len(s.stack) >= maxDepth {
				return &scanProblem{msg: fmt.Sprintf("JSON nests deeper than %d levels (at %s)", maxDepth, position(d, int64(i)))}
			}
			s.stack = append(s.stack, frame{obj: c == '{', needKey: c == '{'})
			starts = append(starts, i)
			i++
		case '}', ']':
			if len(s.stack) == 0 {
				return nil
			}
			s.stack = s.stack[:len(s.stack)-1]
			start := starts[len(starts)-1]
			starts = starts[:len(starts)-1]
			i++
			s.valueDone(start, i)
		case '"':
			start := i
			j, esc := i+1, false
			for j < len(d) && d[j] != '"' {
				if d[j] == '\\' {
					esc = true
					j++
				}
				j++
			}
			if j >= len(d) {
				return nil
			}
			raw := d[i+1 : j]
			i = j + 1
			n := len(s.stack)
			isKey := n > 0 && s.stack[n-1].obj && s.stack[n-1].needKey
			if !utf8.Valid(raw) {
				where := s.pointer()
				if isKey {
					where = s.pointer() // the object holding the key
				}
				return &scanProblem{ptr: where, hasPtr: true, msg: "a string is not valid UTF-8 (names and values must be UTF-8 text)"}
			}
			if esc {
				if u, ok := badEscape(raw); ok {
					msg := fmt.Sprintf("a string holds a lone UTF-16 surrogate (\\u%04x), which is no character: it would be read as U+FFFD and the name would silently change (fix the string where the dump is made)", u)
					if u == 0 {
						msg = "a string holds a NUL character (\\u0000): no name needs one, C strings and terminals cut at it, and PostgreSQL cannot store it (fix the string where the dump is made)"
					}
					return &scanProblem{ptr: s.pointer(), hasPtr: true, msg: msg}
				}
			}
			if isKey {
				key := string(raw)
				if esc {
					var k string
					if json.Unmarshal(d[start:i], &k) != nil {
						return nil
					}
					key = k
				}
				f := &s.stack[n-1]
				f.key, f.needKey, f.afterKey = key, false, true
				if f.seen(key) {
					return &scanProblem{ptr: s.pointer(), hasPtr: true, msg: fmt.Sprintf("duplicate key %q in one object", key)}
				}
				continue
			}
			s.valueDone(start, i)
		default:
			start := i
			for i < len(d) && bytes.IndexByte([]byte("+-0123456789.eEtruefalsn"), d[i]) >= 0 {
				i++
			}
			if i == start {
				return nil // not JSON: the decoder says where
			}
			if (c == '-' || (c >= '0' && c <= '9')) && i-start > MaxNumberLen {
				return &scanProblem{ptr: s.pointer(), hasPtr: true, msg: fmt.Sprintf("a number literal of %d characters (more than %d): not a number a dump holds", i-start, MaxNumberLen)}
			}
			s.valueDone(start, i)
		}
	}
	return s.problem
}

// badEscape finds, in a string's raw bytes, a \u escape of a UTF-16 surrogate that is not half
// of a high-low pair, or of NUL (returned as 0). encoding/json reads a lone surrogate as U+FFFD
// without a word (Python's json keeps it as such), so a name would change on its way into the
// store; a NUL is refused because PostgreSQL cannot store it, and SQLite would.
func badEscape(raw []byte) (rune, bool) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		var r rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue // another escape (\\ included): its next byte is skipped with it
		}
		r, ok := hex4(raw[i+1:])
		if !ok {
			continue // a bad escape: the decoder names it
		}
		i += 4
		switch {
		case r == 0:
			return 0, true // NUL: not a surrogate, refused alike (the caller words it)
		case r >= 0xDC00 && r <= 0xDFFF:
			return r, true // a low half with no high half before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, ok := hex4(raw[i+3:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return r, true
		}
	}
	return 0, false
}

// prescan runs the scanner over a whole document.
func prescan(data []byte, maxDepth int) *scanProblem {
	s := &scanner{data: data, target: -1}
	return s.run(maxDepth)
}

// pointerAt is the JSON pointer of the innermost complete value spanning byte offset off
// (decoders report offsets; people want pointers).
func pointerAt(data []byte, off int64) (string, bool) {
	s := &scanner{data: data, target: int(off)}
	s.run(1 << 20)
	return s.found, s.hit
}

// sniff names formats that are not a JSON dump, so the message says what the file is.
func sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return "starts with a UTF-8 byte-order mark, which JSON does not allow: save it without the BOM"
	case bytes.HasPrefix(data, []byte{0x00, 0x00, 0xFE, 0xFF}), bytes.HasPrefix(data, []byte{0xFF, 0xFE, 0x00, 0x00}):
		return "is UTF-32 text (byte-order mark): a dump is UTF-8 JSON"
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}), bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return "is UTF-16 text (byte-order mark): a dump is UTF-8 JSON"
	case len(data) >= 4 && data[0] == 0 && data[1] == 0 && data[2] == 0 && jsonStart(data[3]),
		len(data) >= 4 && jsonStart(data[0]) && data[1] == 0 && data[2] == 0 && data[3] == 0:
		return "is UTF-32 text: a dump is UTF-8 JSON"
	case len(data) >= 2 && ((data[0] == 0 && jsonStart(data[1])) || (jsonStart(data[0]) && data[1] == 0)):
		return "is UTF-16 text: a dump is UTF-8 JSON"
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return "is a zip archive: unpack it and ingest the .json or .json.gz inside"
	case bytes.HasPrefix(data, []byte("BZh")) && len(data) > 3 && data[3] >= '1' && data[3] <= '9':
		return "is bzip2-compressed: mrep reads plain or gzip-compressed JSON"
	case bytes.HasPrefix(data, []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}):
		return "is xz-compressed: mrep reads plain or gzip-compressed JSON"
	case bytes.HasPrefix(data, []byte{0x28, 0xB5, 0x2F, 0xFD}):
		return "is zstd-compressed: mrep reads plain or gzip-compressed JSON"
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return "is gzip inside gzip (compressed twice): decompress it once"
	}
	return ""
}

// jsonStart: a byte a JSON document (as ASCII) may start with.
func jsonStart(c byte) bool {
	return c == '{' || c == '[' || c == ' ' || c == '\n' || c == '\r' || c == '\t'
}

// peekBytes is how much of a file LooksLikeDump reads: the exporter writes schema_version first
// in plain dumps and, with sorted keys, framework.mrep_export right after the config (a few
// KiB) in compressed ones.
const peekBytes = 1 << 20

// LooksLikeDump says whether the file at path is plausibly a dump (its first MiB, decompressed,
// names schema_version or mrep_export), so that a directory walk can pass over the other JSON
// a training run leaves (config.json, trainer_state.json, tokenizer files). A file that cannot
// be read counts as a dump: ingest then reports why.
func LooksLikeDump(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return true
		}
		defer zr.Close()
		r = zr
	}
	head, _ := io.ReadAll(io.LimitReader(r, peekBytes))
	return bytes.Contains(head, []byte(`"schema_version"`)) || bytes.Contains(head, []byte(`"mrep_export"`))
}
