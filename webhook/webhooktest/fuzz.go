package webhooktest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"
)

type fuzzOptions struct {
	fillFuncs []any
	cmpOpts   []cmp.Option
	seeds     [][]byte
}

// FuzzOption configures [FuzzConversion].
type FuzzOption func(*fuzzOptions)

// WithFillFuncs adds randfill custom fill functions (func(*T, randfill.Continue)),
// e.g. to keep a field within what the API accepts.
func WithFillFuncs(funcs ...any) FuzzOption {
	return func(o *fuzzOptions) { o.fillFuncs = append(o.fillFuncs, funcs...) }
}

// WithCompareOptions adds go-cmp options to the round-trip comparison.
func WithCompareOptions(opts ...cmp.Option) FuzzOption {
	return func(o *fuzzOptions) { o.cmpOpts = append(o.cmpOpts, opts...) }
}

// WithSeeds adds seed inputs to the fuzz corpus (each seeds randfill).
func WithSeeds(seeds ...[]byte) FuzzOption {
	return func(o *fuzzOptions) { o.seeds = append(o.seeds, seeds...) }
}

// FuzzConversion checks that conversion between hub and spoke loses nothing,
// in both directions:
//
//   - spoke → hub → spoke gives back the spoke;
//   - hub → spoke → hub gives back the hub (fields the spoke cannot hold must
//     travel in an annotation, see github.com/opkit/opkit/webhook/conversion).
//
// Objects are filled by randfill seeded from the fuzz input, with TypeMeta
// left empty (conversion code does not own it) and the metadata filled too,
// so conversions must copy it. nil and empty slices and maps compare equal.
// Call it from a Go fuzz target; with `go test` it runs its built-in seeds
// (plus WithSeeds and testdata/fuzz) as a unit test, with `go test -fuzz` it
// explores:
//
//	func FuzzGizmoV1alpha1(f *testing.F) {
//		webhooktest.FuzzConversion(f, &v1.Gizmo{}, &v1alpha1.Gizmo{})
//	}
func FuzzConversion[H conversion.Hub, S conversion.Convertible](f *testing.F, hub H, spoke S, opts ...FuzzOption) {
	f.Helper()
	var o fuzzOptions
	for _, opt := range opts {
		opt(&o)
	}
	seeds := append([][]byte{
		nil, {0}, {1, 2, 3, 4}, []byte("opkit"), []byte("hub and spoke round trip"),
		{0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0},
	}, o.seeds...)
	for i := range 16 {
		seeds = append(seeds, []byte{byte(i * 17), byte(i), 42, byte(255 - i)})
	}
	for _, s := range seeds {
		f.Add(s)
	}
	cmpOpts := append([]cmp.Option{cmpopts.EquateEmpty()}, o.cmpOpts...)
	f.Fuzz(func(t *testing.T, data []byte) {
		filler := func() *randfill.Filler {
			return randfill.NewFromGoFuzz(data).NilChance(0.2).NumElements(0, 3).MaxDepth(8).
				Funcs(append([]any{func(tm *metav1.TypeMeta, _ randfill.Continue) { *tm = metav1.TypeMeta{} }}, o.fillFuncs...)...)
		}

		s := newOf(spoke)
		filler().Fill(s)
		h := newOf(hub)
		if err := s.ConvertTo(h); err != nil {
			t.Fatalf("spoke→hub: %v", err)
		}
		s2 := newOf(spoke)
		if err := s2.ConvertFrom(h); err != nil {
			t.Fatalf("hub→spoke: %v", err)
		}
		if diff := cmp.Diff(s, s2, cmpOpts...); diff != "" {
			t.Errorf("spoke→hub→spoke lost data (-original +round-tripped):\n%s", diff)
		}

		h = newOf(hub)
		filler().Fill(h)
		s = newOf(spoke)
		if err := s.ConvertFrom(h); err != nil {
			t.Fatalf("hub→spoke: %v", err)
		}
		h2 := newOf(hub)
		if err := s.ConvertTo(h2); err != nil {
			t.Fatalf("spoke→hub: %v", err)
		}
		if diff := cmp.Diff(h, h2, cmpOpts...); diff != "" {
			t.Errorf("hub→spoke→hub lost data (-original +round-tripped):\n%s", diff)
		}
	})
}
