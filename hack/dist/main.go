// Command dist packs release archives and renders the krew manifest.
//
//	dist archive  -version V -bin FILE -os OS -arch ARCH -out DIR FILE…
//	dist manifest -version V -template .krew.yaml -dist DIR -base-url URL -out FILE…
//
// Archives are kubectl-mesh_<V>_<os>_<arch>.tar.gz (.zip for windows) with the
// binary and the given files at the top; each archive's sha256 is appended
// to DIR/kubectl-mesh_<V>_checksums.txt. The manifest replaces {{ .TagName }}
// and each {{addURIAndSha "URL" .TagName }} with the archive's uri and sha256.
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dist archive|manifest …")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "archive":
		err = archive(os.Args[2:])
	case "manifest":
		err = manifest(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

var epoch = time.Unix(0, 0)

func archive(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ExitOnError)
	version := fs.String("version", "", "release version")
	bin := fs.String("bin", "", "the built binary")
	goos := fs.String("os", "", "GOOS")
	arch := fs.String("arch", "", "GOARCH")
	out := fs.String("out", "dist", "output directory")
	_ = fs.Parse(args)
	binName := "kubectl-mesh"
	ext := ".tar.gz"
	if *goos == "windows" {
		binName, ext = "kubectl-mesh.exe", ".zip"
	}
	files := append([]string{*bin + "=" + binName}, fs.Args()...)
	name := fmt.Sprintf("kubectl-mesh_%s_%s_%s%s", *version, *goos, *arch, ext)
	path := filepath.Join(*out, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	if ext == ".zip" {
		zw := zip.NewWriter(w)
		for _, spec := range files {
			src, dst := split(spec)
			body, mode, err := read(src)
			if err != nil {
				return err
			}
			hdr := &zip.FileHeader{Name: dst, Method: zip.Deflate, Modified: epoch}
			hdr.SetMode(mode)
			fw, err := zw.CreateHeader(hdr)
			if err != nil {
				return err
			}
			if _, err := fw.Write(body); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
	} else {
		gz := gzip.NewWriter(w)
		tw := tar.NewWriter(gz)
		for _, spec := range files {
			src, dst := split(spec)
			body, mode, err := read(src)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: dst, Mode: int64(mode.Perm()), Size: int64(len(body)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
			if _, err := tw.Write(body); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
	}
	sums, err := os.OpenFile(filepath.Join(*out, fmt.Sprintf("kubectl-mesh_%s_checksums.txt", *version)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer sums.Close()
	_, err = fmt.Fprintf(sums, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	return err
}

func split(spec string) (string, string) {
	if src, dst, ok := strings.Cut(spec, "="); ok {
		return src, dst
	}
	return spec, filepath.Base(spec)
}

func read(path string) ([]byte, os.FileMode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	b, err := os.ReadFile(path)
	return b, st.Mode(), err
}

var uriAndSha = regexp.MustCompile(`\{\{\s*addURIAndSha\s+"([^"]+)"\s+\.TagName\s*\}\}`)

func manifest(args []string) error {
	fs := flag.NewFlagSet("manifest", flag.ExitOnError)
	version := fs.String("version", "", "release version")
	tmpl := fs.String("template", ".krew.yaml", "manifest template")
	dist := fs.String("dist", "dist", "directory with the archives and checksums")
	baseURL := fs.String("base-url", "", "replaces the URL up to the archive name (for a local test)")
	_ = fs.Parse(args)
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(*dist, fmt.Sprintf("kubectl-mesh_%s_checksums.txt", *version)))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 {
			sums[fields[1]] = fields[0]
		}
	}
	f.Close()
	t, err := os.ReadFile(*tmpl)
	if err != nil {
		return err
	}
	var missing []string
	out := uriAndSha.ReplaceAllStringFunc(string(t), func(m string) string {
		url := strings.ReplaceAll(uriAndSha.FindStringSubmatch(m)[1], "{{ .TagName }}", *version)
		name := url[strings.LastIndex(url, "/")+1:]
		if *baseURL != "" {
			url = strings.TrimSuffix(*baseURL, "/") + "/" + name
		}
		sum, ok := sums[name]
		if !ok {
			missing = append(missing, name)
		}
		return "uri: " + url + "\n    sha256: " + sum
	})
	if len(missing) > 0 {
		return fmt.Errorf("no archive for %v in %s", missing, *dist)
	}
	out = strings.ReplaceAll(out, "{{ .TagName }}", *version)
	for _, o := range fs.Args() {
		if err := os.MkdirAll(filepath.Dir(o), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}
