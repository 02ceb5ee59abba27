package ingest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"
)

// ContentHash is the dump's identity as the exporter computes it: sha256 over the canonical
// JSON of the document without run.created_at and run.content_hash. Canonical is Python's
// json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False): keys sorted by code
// point, no whitespace, numbers as written (the decoder keeps their literals), strings with
// only '"', '\\' and control characters escaped. doc is the document decoded with UseNumber.
func ContentHash(doc any) (string, error) {
	obj, ok := doc.(map[string]any)
	if !ok {
		return "", fmt.Errorf("the document is not an object")
	}
	body := make(map[string]any, len(obj))
	for k, v := range obj {
		body[k] = v
	}
	if run, ok := obj["run"].(map[string]any); ok {
		r := make(map[string]any, len(run))
		for k, v := range run {
			if k != "created_at" && k != "content_hash" {
				r[k] = v
			}
		}
		body["run"] = r
	}
	h := sha256.New()
	w := bufio.NewWriterSize(h, 64<<10) // stream into the hash: no copy of the whole document
	if err := canonical(w, body); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func canonical(b *bufio.Writer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(x.String())
	case string:
		pyString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case canonicalItems: // a list canonicalised in parts (fast.go)
		b.WriteByte('[')
		for i, part := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(part)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // UTF-8 byte order is code-point order, as Python sorts
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			pyString(b, k)
			b.WriteByte(':')
			if err := canonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

// pyString writes s as Python's json.dumps(ensure_ascii=False) does.
func pyString(b stringWriter, s string) {
	b.WriteByte('"')
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain { // the common case: nothing to escape
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			b.WriteString(fmt.Sprintf(`\u%04x`, r))
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	b.WriteByte('"')
}

// Rehash returns the JSON dump in data with run.content_hash recomputed: for tests and tools
// that build or edit dumps on purpose (an edited dump keeps a stale hash and is rejected).
func Rehash(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	run, ok := doc["run"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no run object")
	}
	h, err := ContentHash(doc)
	if err != nil {
		return nil, err
	}
	run["content_hash"] = h
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type stringWriter interface {
	WriteByte(byte) error
	WriteString(string) (int, error)
}
