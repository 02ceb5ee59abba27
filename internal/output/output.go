// Package output writes what a command produces so that no reader ever sees half of it and
// nothing a user owns is overwritten: a directory of files is replaced whole (or refused when it
// holds files mrep does not write), a single file by a temporary file and a rename. It knows
// nothing of mrep's content; commands render into memory first and hand the bytes here.
package output

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Files collects an output directory's files in memory, so nothing touches the disk until
// everything rendered.
type Files map[string][]byte

// Add renders one file into memory; its error names the file.
func (o Files) Add(name string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	o[name] = b.Bytes()
	return nil
}

// ownedFile says whether a file in an existing output directory is one mrep writes there, so
// replacing the directory cannot delete a user's own files.
func ownedFile(name string) bool {
	switch filepath.Ext(name) {
	case ".md", ".png", ".svg", ".json", ".csv", ".sh", ".yml", ".toml":
		return true
	}
	return false
}

// WriteDir makes dir hold exactly files, or leaves it as it was: the files go into a
// temporary sibling directory which is then renamed into place (the previous directory, if
// any, is moved aside first and removed after). A failure leaves the previous complete output
// or none, never a mix of two runs' files; a failed write does not create dir. An existing dir
// is replaced only when it holds nothing but what mrep's last output there listed in its
// Manifest: a user's file (even a serve.md), a subdirectory, or a directory without a
// manifest is refused, and nothing is touched.
func WriteDir(dir string, files Files) error {
	dir = filepath.Clean(dir)
	for name := range files {
		if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("write %s: %q is not a plain file name", dir, name) // a defect: names are fixed or sanitised
		}
	}
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("write %s: exists and is not a directory", dir)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
		wrote, hasManifest := readManifest(dir)
		for _, e := range ents {
			switch {
			case e.Name() == Manifest:
			case !e.Type().IsRegular() || !ownedFile(e.Name()):
				return fmt.Errorf("write %s: the directory holds %q, which mrep does not write; choose an empty or new directory", dir, e.Name())
			case !hasManifest:
				return fmt.Errorf("write %s: the directory holds %q and no %s, so mrep cannot tell it wrote it (it never overwrites a file of yours); choose an empty or new directory", dir, e.Name(), Manifest)
			case !wrote[e.Name()]:
				return fmt.Errorf("write %s: the directory holds %q, which mrep's last output there did not write; choose an empty or new directory", dir, e.Name())
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; cleans up after a failure
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := writeSynced(filepath.Join(tmp, n), files[n]); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	manifest := "# written by mrep: the files of this output directory; mrep replaces the directory only while it holds no others\n" + strings.Join(names, "\n") + "\n"
	if err := writeSynced(filepath.Join(tmp, Manifest), []byte(manifest)); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	var old string
	if _, err := os.Lstat(dir); err == nil {
		old = filepath.Join(parent, "."+filepath.Base(dir)+".old-"+filepath.Base(tmp))
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir) // put the previous output back
		}
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteFile writes data via a temp file in the same directory and a rename, so a
// reader never sees half a report.
func WriteFile(path string, write func(io.Writer) error) error {
	// only a regular file is replaced: a rename over a device node, a FIFO or a link would
	// put a regular file in its place (as root, -o /dev/full would replace the device)
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("write %s: %w (%s): give the path of a file", path, ErrNotRegular, kind(fi.Mode()))
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("write %s: its directory %s cannot be written by this user: %w", path, dir, fs.ErrPermission)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Manifest is the file an output directory lists its files in: what mrep wrote there, so a
// later run replaces only its own output and never a file a user put beside it.
const Manifest = ".mrep-output"

// readManifest is the set of files the directory's manifest lists (false: no manifest).
func readManifest(dir string) (map[string]bool, bool) {
	b, err := os.ReadFile(filepath.Join(dir, Manifest))
	if err != nil {
		return nil, false
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out[l] = true
		}
	}
	return out, true
}

// ErrNotRegular: the output path holds something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// kind names what a non-regular file is, for the message.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}
