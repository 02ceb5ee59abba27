package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/schemas"
)

// The fast path for large dumps. The reference path (decodeBytes' slow half) lexes the whole
// document, decodes it into generic values, walks the module tree, then re-encodes it for the
// content hash: one core, and a heap of every module as maps. A dump of 200,000 modules spent
// 3.8 s there. Here the module list is cut into its items by a structural scan, and the items
// are lexed, decoded, checked and canonicalised for the hash in parallel, item by item, so
// only the typed modules stay alive.
//
// The fast path is optimistic: it accepts a dump only when every step succeeds, and on any
// problem at all it gives up and the reference path decides, so messages, pointers and the
// order in which problems are found stay exactly those of the reference path (and tested
// there). TestFastPathAgrees runs both on every fixture and on mutations.

// minFastModules: below this the reference path is fast enough and the split not worth it.
var minFastModules = 64

// errFallback: the fast path declines; the reference path will decide.
var errFallback = errors.New("fast path declined")

// fastDecode decodes data on the fast path, or returns errFallback.
func fastDecode(data []byte) (*model.Dump, error) { return fastStream(data, nil) }

// sinkError is a failure of the sink (the store), not of the dump: it ends the decode as it is.
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }
func (e sinkError) Unwrap() error { return e.err }

// fastStream is fastDecode that hands the header, then the modules in order as they are
// decoded, to sink (when not nil). The sink must drop them when the result is not a dump.
func fastStream(data []byte, sink Sink) (*model.Dump, error) {
	sp, ok := splitTop(data)
	if !ok || len(sp.items) < minFastModules {
		return nil, errFallback
	}
	first := data[sp.items[0][0]:sp.items[0][1]]
	skel := make([]byte, 0, sp.open+len(first)+2+len(data)-sp.close)
	skel = append(skel, data[:sp.open]...)
	skel = append(skel, '[')
	skel = append(skel, first...)
	skel = append(skel, ']')
	skel = append(skel, data[sp.close:]...)
	if prescan(skel, MaxDepth) != nil {
		return nil, errFallback
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(skel))
	dec.UseNumber()
	if dec.Decode(&doc) != nil || dec.More() {
		return nil, errFallback
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errFallback
	}
	if v, ok := obj["schema_version"].(json.Number); !ok || !schemas.DumpVersionKnown(v.String()) {
		return nil, errFallback
	}
	sch, err := dumpSchema()
	if err != nil {
		return nil, err
	}
	if sch.Validate(doc) != nil {
		return nil, errFallback
	}
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "modules" {
			rest[k] = v
		}
	}
	typed, err := json.Marshal(rest)
	if err != nil {
		return nil, errFallback
	}
	var d model.Dump
	dec = json.NewDecoder(bytes.NewReader(typed))
	dec.UseNumber()
	if dec.Decode(&d) != nil {
		return nil, errFallback
	}
	var emit func(lo int, ms []model.Module) error
	if sink != nil {
		if err := sink.Header(&d, len(sp.items)); err != nil {
			return nil, sinkError{err}
		}
		emit = sink.Modules
	}
	mods, canon, err := decodeItems(data, sp.items, emit)
	if err != nil {
		return nil, err
	}
	d.Modules = mods
	if Check(&d) != nil {
		return nil, errFallback
	}
	obj["modules"] = canonicalItems(canon)
	h, err := ContentHash(obj)
	if err != nil || h != d.Run.ContentHash {
		return nil, errFallback
	}
	return &d, nil
}

// canonicalItems is a module list already in canonical form (one buffer per chunk of items,
// each item's canonical JSON joined by commas); canonical() writes it as it stands.
type canonicalItems [][]byte

// decodeItems lexes, decodes, checks and canonicalises the module items in parallel chunks,
// and hands each finished run of chunks to emit (when not nil) in order, from this goroutine.
// It returns errFallback when an item is not what the fast path accepts, or the emit error.
func decodeItems(data []byte, items [][2]int, emit func(lo int, ms []model.Module) error) ([]model.Module, canonicalItems, error) {
	out := make([]model.Module, len(items))
	workers := runtime.GOMAXPROCS(0)
	chunks := workers * 4 // several per worker: items differ in size
	if emit != nil {
		chunks = workers * 16 // smaller, so the store starts early and keeps up
	}
	if chunks > len(items) {
		chunks = len(items)
	}
	bounds := func(c int) (int, int) { return c * len(items) / chunks, (c + 1) * len(items) / chunks }
	canon := make(canonicalItems, chunks)
	var bad atomic.Bool
	var wg sync.WaitGroup
	next := make(chan int, chunks)
	done := make(chan int, chunks) // finished chunks; -1: an item failed
	for c := 0; c < chunks; c++ {
		next <- c
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec := &valueDecoder{}
			walk := &modWalker{}
			var scratch []byte
			for c := range next {
				if bad.Load() {
					return
				}
				lo, hi := bounds(c)
				var buf bytes.Buffer
				buf.Grow(items[hi-1][1] - items[lo][0])
				bw := bufio.NewWriterSize(&buf, 32<<10)
				failed := func() { bad.Store(true); done <- -1 }
				for i := lo; i < hi; i++ {
					raw := data[items[i][0]:items[i][1]]
					// the item nests two levels below the document: / and /modules
					v, ok := dec.decode(raw, MaxDepth-2)
					if !ok {
						failed()
						return
					}
					walk.path = append(walk.path[:0], "modules", i)
					if walk.module(v, &out[i]) != nil {
						failed()
						return
					}
					if i > lo {
						bw.WriteByte(',')
					}
					switch {
					case dec.canonicalAsWritten() && !dec.spaced:
						bw.Write(raw)
					case dec.canonicalAsWritten():
						scratch = stripSpace(scratch[:0], raw)
						bw.Write(scratch)
					default:
						if canonical(bw, v) != nil {
							failed()
							return
						}
					}
				}
				bw.Flush()
				canon[c] = buf.Bytes()
				done <- c
			}
		}()
	}
	// hand finished chunks to emit in order, as they complete
	finished := make([]bool, chunks)
	var err error
	emitted := 0
	for received := 0; received < chunks && err == nil; received++ {
		c := <-done
		if c < 0 {
			err = errFallback
			break
		}
		finished[c] = true
		for emitted < chunks && finished[emitted] {
			if emit != nil {
				lo, hi := bounds(emitted)
				if e := emit(lo, out[lo:hi]); e != nil {
					err = sinkError{e}
					bad.Store(true)
					break
				}
			}
			emitted++
		}
	}
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	return out, canon, nil
}

// split is where the top-level "modules" array lies in a document and where its items are.
type split struct {
	open, close int      // data[open] is '[', data[close-1] is ']'
	items       [][2]int // [start, end) of each item
}

// splitTop finds the top-level "modules" array and its items with a structural scan (strings
// and brackets only). It declines (ok false) on anything unusual: the reference path then
// reports the problem.
func splitTop(data []byte) (split, bool) {
	var sp split
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return sp, false
	}
	i++
	found := false
	for {
		i = skipWS(data, i)
		if i >= len(data) || data[i] != '"' {
			return sp, false
		}
		end, esc := skipString(data, i)
		if end < 0 || esc {
			return sp, false // an escaped key might spell "modules": let the reference path see it
		}
		key := data[i+1 : end-1]
		i = skipWS(data, end)
		if i >= len(data) || data[i] != ':' {
			return sp, false
		}
		i = skipWS(data, i+1)
		if string(key) == "modules" {
			if found || i >= len(data) || data[i] != '[' {
				return sp, false
			}
			found = true
			sp.open = i
			i = skipWS(data, i+1)
			if i < len(data) && data[i] == ']' {
				i++
			} else {
				for {
					end := skipValue(data, i)
					if end < 0 {
						return sp, false
					}
					sp.items = append(sp.items, [2]int{i, end})
					i = skipWS(data, end)
					if i >= len(data) {
						return sp, false
					}
					if data[i] == ']' {
						i++
						break
					}
					if data[i] != ',' {
						return sp, false
					}
					i = skipWS(data, i+1)
				}
			}
			sp.close = i
		} else if i = skipValue(data, i); i < 0 {
			return sp, false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return sp, false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return sp, false
		}
		i++
	}
	return sp, found
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at d[i] == '"' (or -1) and whether
// it holds an escape.
func skipString(d []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(d); j++ {
		switch d[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// skipValue returns the offset after the value starting at d[i], or -1. Validity is not its
// job (the item decoder checks every item); it only has to find the value's end.
func skipValue(d []byte, i int) int {
	if i >= len(d) {
		return -1
	}
	switch d[i] {
	case '"':
		end, _ := skipString(d, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				end, _ := skipString(d, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(d) && bytes.IndexByte([]byte("+-0123456789.eEtruefalsn"), d[j]) >= 0 {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// valueDecoder decodes one JSON value into the generic values encoding/json produces with
// UseNumber (map[string]any, []any, json.Number, string, bool, nil), strictly: anything
// encoding/json would reject, it rejects (and the reference path then says why). It also
// refuses what the prescan refuses (nesting beyond a depth, duplicate keys, invalid UTF-8,
// long number literals), so an item needs no separate lexical pass, and it notes whether
// the item is already canonical for the content hash: keys in order, no escapes.
type valueDecoder struct {
	d        []byte
	i        int
	depth    int
	maxDepth int
	unsorted bool // some object's keys are not in increasing order
	escaped  bool // some string holds an escape
	spaced   bool // whitespace between tokens
}

func (v *valueDecoder) decode(raw []byte, maxDepth int) (any, bool) {
	*v = valueDecoder{d: raw, maxDepth: maxDepth}
	x, ok := v.value()
	if !ok {
		return nil, false
	}
	v.ws()
	return x, v.i == len(v.d)
}

// canonicalAsWritten says whether the item's canonical JSON is its own bytes without the
// whitespace between tokens (the exporter writes sorted keys, so it usually is).
func (v *valueDecoder) canonicalAsWritten() bool { return !v.unsorted && !v.escaped }

func (v *valueDecoder) ws() {
	for v.i < len(v.d) {
		switch v.d[v.i] {
		case ' ', '\n', '\r', '\t':
			v.i++
			v.spaced = true
		default:
			return
		}
	}
}

func (v *valueDecoder) value() (any, bool) {
	v.ws()
	if v.i >= len(v.d) {
		return nil, false
	}
	switch c := v.d[v.i]; {
	case c == '{':
		if v.depth++; v.depth > v.maxDepth {
			return nil, false
		}
		v.i++
		m := make(map[string]any, 8)
		v.ws()
		if v.i < len(v.d) && v.d[v.i] == '}' {
			v.i++
			v.depth--
			return m, true
		}
		prev := ""
		for n := 0; ; n++ {
			v.ws()
			k, ok := v.str()
			if !ok {
				return nil, false
			}
			if _, dup := m[k]; dup {
				return nil, false
			}
			if n > 0 && k <= prev {
				v.unsorted = true
			}
			prev = k
			v.ws()
			if v.i >= len(v.d) || v.d[v.i] != ':' {
				return nil, false
			}
			v.i++
			x, ok := v.value()
			if !ok {
				return nil, false
			}
			m[k] = x
			v.ws()
			if v.i >= len(v.d) {
				return nil, false
			}
			if v.d[v.i] == '}' {
				v.i++
				v.depth--
				return m, true
			}
			if v.d[v.i] != ',' {
				return nil, false
			}
			v.i++
		}
	case c == '[':
		if v.depth++; v.depth > v.maxDepth {
			return nil, false
		}
		v.i++
		a := make([]any, 0, 4)
		v.ws()
		if v.i < len(v.d) && v.d[v.i] == ']' {
			v.i++
			v.depth--
			return a, true
		}
		for {
			x, ok := v.value()
			if !ok {
				return nil, false
			}
			a = append(a, x)
			v.ws()
			if v.i >= len(v.d) {
				return nil, false
			}
			if v.d[v.i] == ']' {
				v.i++
				v.depth--
				return a, true
			}
			if v.d[v.i] != ',' {
				return nil, false
			}
			v.i++
		}
	case c == '"':
		s, ok := v.str()
		return s, ok
	case c == 't':
		return true, v.lit("true")
	case c == 'f':
		return false, v.lit("false")
	case c == 'n':
		return nil, v.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number()
	}
	return nil, false
}

func (v *valueDecoder) lit(s string) bool {
	if len(v.d)-v.i < len(s) || string(v.d[v.i:v.i+len(s)]) != s {
		return false
	}
	v.i += len(s)
	return true
}

// number accepts exactly JSON's grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, up to
// MaxNumberLen characters.
func (v *valueDecoder) number() (any, bool) {
	d, start := v.d, v.i
	i := v.i
	if d[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if !digits() {
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	if i-start > MaxNumberLen {
		return nil, false
	}
	v.i = i
	return json.Number(d[start:i]), true
}

// str decodes a string at v.i. Plain strings (no escape) are copied as they are, once checked
// to be UTF-8; strings with escapes go through encoding/json, whose rules for \u surrogates
// are the reference.
func (v *valueDecoder) str() (string, bool) {
	d := v.d
	if v.i >= len(d) || d[v.i] != '"' {
		return "", false
	}
	esc := false
	for j := v.i + 1; j < len(d); j++ {
		c := d[j]
		switch {
		case c == '"':
			raw := d[v.i : j+1]
			v.i = j + 1
			if !utf8.Valid(raw) {
				return "", false
			}
			if !esc {
				return string(raw[1 : len(raw)-1]), true
			}
			v.escaped = true
			if _, lone := badEscape(raw); lone {
				return "", false // the reference path names the string
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			esc = true
			j++
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// stripSpace appends raw without the whitespace between tokens (strings keep theirs).
func stripSpace(out, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\n', '\r', '\t':
		case '"':
			end, _ := skipString(raw, i)
			out = append(out, raw[i:end]...)
			i = end - 1
		default:
			out = append(out, c)
		}
	}
	return out
}
