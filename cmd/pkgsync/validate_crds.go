package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// maxCRDFileBytes bounds each file --crds names or holds: a cluster's CustomResourceDefinitions
// as "kubectl get crd -o yaml" writes them fit many times over, and nothing larger is read.
const maxCRDFileBytes = 64 << 20

// readCRDs reads the CustomResourceDefinitions of the files and directories in paths: each
// file (.yaml, .yml or .json in a directory, at any depth) a stream of YAML or JSON documents,
// a List's items read as documents. Other objects are skipped: a chart's or a cluster dump's
// other kinds do not matter here.
func readCRDs(paths []string) ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	for _, p := range paths {
		err := filepath.WalkDir(p, func(file string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || (file != p && !isManifestFile(file)) {
				return nil
			}
			found, err := readCRDFile(file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			crds = append(crds, found...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("--crds %s: %w", p, err)
		}
	}
	return crds, nil
}

func isManifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readCRDFile reads the CustomResourceDefinitions of one file.
func readCRDFile(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if info.Size() > maxCRDFileBytes {
		return nil, fmt.Errorf("%d bytes, over the %d read", info.Size(), maxCRDFileBytes)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(io.LimitReader(f, maxCRDFileBytes), 4096)
	var crds []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, err
		}
		// apimachinery's json keeps integers as int64, as the API machinery expects.
		var doc map[string]any
		if err := utiljson.Unmarshal(raw, &doc); err != nil {
			return nil, err
		}
		crds = append(crds, crdsOf(doc)...)
	}
}

// crdsOf returns doc if it is a CustomResourceDefinition, the definitions among its items if
// it is a list.
func crdsOf(doc map[string]any) []*unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: doc}
	if obj.GetKind() == "CustomResourceDefinition" {
		return []*unstructured.Unstructured{obj}
	}
	items, ok := doc["items"].([]any)
	if !ok || !strings.HasSuffix(obj.GetKind(), "List") {
		return nil
	}
	var crds []*unstructured.Unstructured
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			crds = append(crds, crdsOf(m)...)
		}
	}
	return crds
}
