package output

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func files(t *testing.T, content string) Files {
	t.Helper()
	f := Files{}
	if err := f.Add("a.md", func(w io.Writer) error { _, err := io.WriteString(w, content); return err }); err != nil {
		t.Fatal(err)
	}
	return f
}

// A directory is replaced whole; one holding a user's own file is refused and left as it was;
// a failed render names its file and writes nothing.
func TestWriteDirReplacesWholeOrRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteDir(dir, files(t, "one")); err != nil {
		t.Fatal(err)
	}
	two := files(t, "two")
	two["b.png"] = []byte("png")
	if err := WriteDir(dir, two); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.md")); string(b) != "two" {
		t.Errorf("a.md = %q after the second write", b)
	}
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteDir(dir, files(t, "three"))
	if err == nil || !strings.Contains(err.Error(), `"notes.txt", which mrep does not write`) {
		t.Fatalf("a directory with a user's file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.md")); string(b) != "two" {
		t.Error("a refused write changed the directory")
	}
	bad := Files{}
	err = bad.Add("c.md", func(io.Writer) error { return errors.New("boom") })
	if err == nil || !strings.Contains(err.Error(), "c.md: boom") {
		t.Errorf("a failed render: %v", err)
	}
	if err := WriteDir(dir, Files{"../x": nil}); err == nil {
		t.Error("a path as a file name must be refused")
	}
}

// A single file appears whole or not at all: a failed write leaves the previous content.
func TestWriteFileIsAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "chips.json")
	if err := WriteFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(p, func(w io.Writer) error { io.WriteString(w, "half"); return errors.New("disk full") })
	if err == nil {
		t.Fatal("the failure must be returned")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("after a failed write: %q", b)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// A directory mrep did not write is never replaced, even when its files bear the names mrep
// writes; one it wrote (its manifest lists every file) is, and a file added beside mrep's
// output stops the next write.
func TestWriteDirNeverOverwritesAUsersFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(dir, 0o755)
	mine := filepath.Join(dir, "serve.md")
	os.WriteFile(mine, []byte("my notes"), 0o644)
	if err := WriteDir(dir, Files{"serve.md": []byte("mrep")}); err == nil || !strings.Contains(err.Error(), "cannot tell it wrote it") {
		t.Fatalf("a user's serve.md: %v", err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "my notes" {
		t.Fatal("the user's file was touched")
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	for i := 0; i < 2; i++ { // written, then replaced: the manifest vouches for it
		if err := WriteDir(fresh, Files{"serve.md": []byte("mrep"), "serve.json": []byte("{}")}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	os.WriteFile(filepath.Join(fresh, "notes.md"), []byte("mine"), 0o644)
	if err := WriteDir(fresh, Files{"serve.md": []byte("mrep")}); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Errorf("a file added beside mrep's output: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "notes.md")); err != nil {
		t.Error("the added file was removed")
	}
}

// Only a regular file is replaced: a FIFO, a device node, a symbolic link or a directory at the
// path is refused, named, and left as it was.
func TestWriteFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	for _, c := range []struct{ path, what string }{{fifo, "a FIFO"}, {link, "a symbolic link"}, {sub, "a directory"}, {"/dev/null", "a device"}} {
		before, _ := os.Lstat(c.path)
		err := WriteFile(c.path, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.what) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v", c.path, err)
		}
		after, _ := os.Lstat(c.path)
		if before.Mode() != after.Mode() {
			t.Errorf("%s changed: %v -> %v", c.path, before.Mode(), after.Mode())
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a temporary file was left: %s", e.Name())
		}
	}
}
