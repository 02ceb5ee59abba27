// Package ingest turns bytes into a validated model.Dump: gzip detection, a size cap, JSON
// decoding with UseNumber, the embedded JSON Schema, then the semantic rules the schema cannot
// state. Every error names the file, the JSON pointer and the problem.
package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/schemas"
)

// Sentinels callers branch on (errors.Is); the *Error carries the detail.
var (
	// ErrInvalid: the input is not a valid dump (syntax, schema or semantics).
	ErrInvalid = errors.New("invalid dump")
	// ErrTooLarge: the input, once decompressed, exceeds Options.MaxBytes.
	ErrTooLarge = errors.New("dump too large")
)

// DefaultMaxBytes caps the decompressed size of one dump. DeepSeek-V3 with per-expert Linear
// modules and full weight statistics is about 30 MiB; a gzip bomb stops here.
const DefaultMaxBytes = 256 << 20

// MaxDepth bounds JSON nesting. Real dumps nest below 10 levels (configs a few more).
const MaxDepth = 64

// Error is a rejected input: which file, where in it, and what is wrong.
type Error struct {
	File    string
	Pointer string // RFC 6901 pointer into the document; "" is the whole document
	HasPtr  bool   // false when the problem is not at a place in the JSON (gzip, size, syntax)
	Msg     string
	Err     error // ErrInvalid or ErrTooLarge, or the underlying I/O error
}

func (e *Error) Error() string {
	if e.HasPtr {
		ptr := e.Pointer
		if ptr == "" {
			ptr = "/"
		}
		return fmt.Sprintf("%s: at %s: %s", e.File, ptr, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Options tune decoding.
type Options struct {
	MaxBytes int64 // decompressed size cap; 0 means DefaultMaxBytes
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return DefaultMaxBytes
}

// ReadFile decodes and validates the dump at path (.json or gzip, by content, not by name).
// Only regular files are read: a FIFO, socket or device named *.json is refused, not waited
// on (it is opened non-blocking and checked before any read).
func ReadFile(path string, opt Options) (*model.Dump, error) {
	data, err := readFile(path, opt)
	if err != nil {
		return nil, err
	}
	return decodeBytes(path, data)
}

// readFile reads a regular file, decompressed, within the size cap.
func readFile(path string, opt Options) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot open: %v", errors.Unwrap(err)), Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot stat: %v", err), Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: path, Msg: fmt.Sprintf("not a regular file (%s): refusing to read it", kindOf(fi.Mode())), Err: ErrInvalid}
	}
	return readAllSized(path, f, opt.maxBytes(), fi.Size())
}

func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0, m&os.ModeCharDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "not a plain file"
}

// Decode reads one dump from r; name is used in errors.
func Decode(name string, r io.Reader, opt Options) (*model.Dump, error) {
	data, err := readAll(name, r, opt.maxBytes())
	if err != nil {
		return nil, err
	}
	return decodeBytes(name, data)
}

func invalid(file, msg string) *Error { return &Error{File: file, Msg: msg, Err: ErrInvalid} }

func invalidAt(file, ptr, msg string) *Error {
	return &Error{File: file, Pointer: ptr, HasPtr: true, Msg: msg, Err: ErrInvalid}
}

func readAll(name string, r io.Reader, max int64) ([]byte, error) {
	return readAllSized(name, r, max, 0)
}

// readAllSized is readAll with a size hint (the file's size): a plain dump is read into one
// buffer of that size instead of a doubling one (which zeroed and copied 130 MB for a 67 MB dump).
func readAllSized(name string, r io.Reader, max, hint int64) ([]byte, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	var src io.Reader = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, invalid(name, fmt.Sprintf("not a valid gzip stream: %v", err))
		}
		defer zr.Close()
		src = zr
	}
	var data []byte
	var err error
	if src == io.Reader(br) && hint > 0 && hint <= max {
		buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
		_, err = buf.ReadFrom(io.LimitReader(src, max+1))
		data = buf.Bytes()
	} else {
		data, err = io.ReadAll(io.LimitReader(src, max+1))
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
			return nil, invalid(name, fmt.Sprintf("truncated or corrupt gzip stream: %v", err))
		}
		return nil, &Error{File: name, Msg: fmt.Sprintf("read failed: %v", err), Err: err}
	}
	if int64(len(data)) > max {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d bytes once decompressed; refusing it (raise --max-bytes if it is real)", max), Err: ErrTooLarge}
	}
	if what := sniff(data); what != "" {
		return nil, invalid(name, "not a JSON dump: the file "+what)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, invalid(name, "empty file: expected a JSON dump")
	}
	return data, nil
}

var (
	compileOnce sync.Once
	compiled    *jsonschema.Schema
	compileErr  error
)

func dumpSchema() (*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		if err := c.AddResource(schemas.DumpSchemaID, bytes.NewReader(schemas.Dump)); err != nil {
			compileErr = fmt.Errorf("load dump schema: %w", err)
			return
		}
		compiled, compileErr = c.Compile(schemas.DumpSchemaID)
		if compileErr != nil {
			compileErr = fmt.Errorf("compile dump schema: %w", compileErr)
		}
	})
	return compiled, compileErr
}

func decodeBytes(name string, data []byte) (*model.Dump, error) {
	if d, err := fastDecode(data); !errors.Is(err, errFallback) {
		return d, err
	}
	return referenceDecode(name, data)
}

// referenceDecode is the one path every verdict and message comes from: the whole document
// lexed, decoded, validated, walked and hashed in order on one core.
func referenceDecode(name string, data []byte) (*model.Dump, error) {
	if p := prescan(data, MaxDepth); p != nil {
		if p.hasPtr {
			return nil, invalidAt(name, p.ptr, p.msg)
		}
		return nil, invalid(name, p.msg)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, invalid(name, syntaxMessage(data, err))
	}
	if dec.More() {
		return nil, invalid(name, fmt.Sprintf("unexpected data after the JSON document (at %s)", position(data, dec.InputOffset())))
	}
	if obj, ok := doc.(map[string]any); ok {
		// Say "unsupported version" rather than a schema's "const" complaint: it is the likely cause.
		if v, ok := obj["schema_version"].(json.Number); ok && !schemas.DumpVersionKnown(v.String()) {
			return nil, invalidAt(name, "/schema_version", fmt.Sprintf("schema_version %s is not supported (this mrep reads versions %d to %d)", v, schemas.MinDumpSchemaVersion, schemas.DumpSchemaVersion))
		}
	}
	sch, err := dumpSchema()
	if err != nil {
		return nil, err
	}
	// A large module tree is validated and converted natively (modules.go); the schema
	// validator sees the rest of the document with the first module as its sample.
	skeleton, modules := splitModules(doc)
	if err := sch.Validate(skeleton); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			leaf := deepest(ve)
			return nil, invalidAt(name, leaf.InstanceLocation, "schema: "+leaf.Message)
		}
		return nil, invalid(name, fmt.Sprintf("schema: %v", err))
	}
	var mods []model.Module
	typed := data
	if modules != nil {
		var p *Problem
		if mods, p = decodeModules(modules); p != nil {
			return nil, invalidAt(name, p.Pointer, p.Msg)
		}
		rest := skeleton.(map[string]any)
		delete(rest, "modules")
		if typed, err = json.Marshal(rest); err != nil {
			return nil, invalid(name, fmt.Sprintf("decode: %v", err))
		}
	}
	data = typed
	var d model.Dump
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// e.g. 16384.0 where an integer belongs: JSON Schema calls it an integer, Go does not
			if ptr, ok := pointerAt(data, te.Offset-1); ok {
				return nil, invalidAt(name, ptr, fmt.Sprintf("expected %s, got the %s %s", goKind(te.Type.Kind().String()), te.Value, literalAt(data, te.Offset)))
			}
		}
		return nil, invalid(name, fmt.Sprintf("decode: %v", err))
	}
	if modules != nil {
		d.Modules = mods
	}
	if e := Check(&d); e != nil {
		return nil, invalidAt(name, e.Pointer, e.Msg)
	}
	// The hash is the run's identity (deduplication): a dump edited after export, or one that
	// carries another dump's hash, would be stored under the wrong identity or silently dropped.
	h, err := ContentHash(doc)
	if err != nil {
		return nil, invalid(name, "content hash: "+err.Error())
	}
	if h != d.Run.ContentHash {
		return nil, invalidAt(name, "/run/content_hash", fmt.Sprintf("does not match the dump's content (it hashes to %s): the file was changed after export or carries another dump's hash", h))
	}
	return &d, nil
}

// deepest follows the first cause down to the most specific failure, whose location is the
// most useful pointer ("/modules/3/params/0/numel", not "/modules").
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}

func syntaxMessage(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at %s: %v", position(data, se.Offset), se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("invalid JSON at %s: %v", position(data, te.Offset), te)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "invalid JSON: the document ends early (truncated file?)"
	}
	return fmt.Sprintf("invalid JSON: %v", err)
}

// position renders a byte offset as line:column for people.
func position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := off - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// pointer builds an RFC 6901 pointer from parts.
func pointer(parts ...any) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		s := fmt.Sprint(p)
		s = strings.ReplaceAll(s, "~", "~0")
		s = strings.ReplaceAll(s, "/", "~1")
		b.WriteString(s)
	}
	return b.String()
}

func goKind(k string) string {
	switch k {
	case "int", "int64", "int32", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return "a " + k
}

// literalAt is the (short) literal that ends at off, for messages.
func literalAt(data []byte, off int64) string {
	end := int(off)
	if end > len(data) {
		end = len(data)
	}
	start := end
	for start > 0 && bytes.IndexByte([]byte("+-0123456789.eE"), data[start-1]) >= 0 && end-start < MaxNumberLen {
		start--
	}
	return string(data[start:end])
}

// splitModules returns the document to validate with the schema (modules cut to the first
// item, so the schema still sees one) and the module items to check natively; for a document
// without a module list of two or more, the document itself and nil.
func splitModules(doc any) (any, []any) {
	obj, ok := doc.(map[string]any)
	if !ok {
		return doc, nil
	}
	mods, ok := obj["modules"].([]any)
	if !ok || len(mods) < 2 {
		return doc, nil
	}
	skeleton := make(map[string]any, len(obj))
	for k, v := range obj {
		skeleton[k] = v
	}
	skeleton["modules"] = mods[:1]
	return skeleton, mods
}
