package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// CRDs decodes every document in dir of fsys as a CustomResourceDefinition.
// Decoding is strict: an unknown or duplicate field is an error, so a stale
// or hand-edited CRD fails loudly instead of installing half a schema.
func CRDs(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	err := EachDocument(fsys, dir, func(doc []byte) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return err
		}
		out = append(out, crd)
		return nil
	})
	return out, err
}

// Objects decodes every document in dir of fsys as an unstructured object,
// whatever its kind. A document that decodes to nothing (null) is skipped.
func Objects(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := EachDocument(fsys, dir, func(doc []byte) error {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

// Webhooks decodes every document in dir of fsys as a
// MutatingWebhookConfiguration or a ValidatingWebhookConfiguration, by its
// kind, strictly. Any other kind is an error.
func Webhooks(fsys fs.FS, dir string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	err := EachDocument(fsys, dir, func(doc []byte) error {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return err
			}
			mutating = append(mutating, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return err
			}
			validating = append(validating, v)
		default:
			return fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		return nil
	})
	return mutating, validating, err
}

// kustomizeFile reports whether name is one of the files kustomize reads as
// its own configuration (a kustomization, or the transformer configuration
// kubebuilder's layout keeps beside it): not Kubernetes objects.
func kustomizeFile(name string) bool {
	return slices.Contains([]string{"kustomization.yaml", "kustomizeconfig.yaml"}, name)
}

// EachDocument calls fn with every non-blank YAML document of every file in
// dir of fsys, files in name order, documents in file order, skipping
// kustomize's own files (kustomization.yaml, kustomizeconfig.yaml): an example's config directories
// are kustomize bases, and their manifests are the other files. It stops at
// the first error, from reading or from fn, and returns it prefixed with the
// file's path in fsys.
func EachDocument(fsys fs.FS, dir string, fn func(doc []byte) error) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if kustomizeFile(e.Name()) {
			continue
		}
		name := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			if err := fn(doc); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}
