package source

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/test/testenv"
)

// pushRaw uploads data to target as it is, with the media type given, and returns its descriptor.
func pushRaw(t *testing.T, target *remote.Repository, mediaType string, data []byte) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	require.NoError(t, target.Push(t.Context(), desc, bytes.NewReader(data)))
	return desc
}

// TestPullRejectsHostileSizes pushes manifests whose descriptors declare negative sizes, or sizes
// whose sum overflows int64, and checks the pull stops before downloading a blob.
func TestPullRejectsHostileSizes(t *testing.T) {
	t.Parallel()
	// A registry may refuse these manifests (Distribution stores them): this one must not.
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	target, err := remote.NewRepository(reg.Host + "/sizes")
	require.NoError(t, err)
	target.PlainHTTP = true

	config := pushRaw(t, target, ocispec.MediaTypeImageConfig, []byte("{}"))
	layer := pushRaw(t, target, ocispec.MediaTypeImageLayer, pkoLayer(t))
	sized := func(d ocispec.Descriptor, size int64) ocispec.Descriptor {
		d.Size = size
		return d
	}
	manifest := func(layers ...ocispec.Descriptor) []byte {
		data, err := json.Marshal(ocispec.Manifest{
			Versioned: specs.Versioned{SchemaVersion: 2},
			MediaType: ocispec.MediaTypeImageManifest,
			Config:    config,
			Layers:    layers,
		})
		require.NoError(t, err)
		return data
	}
	good := pushRaw(t, target, ocispec.MediaTypeImageManifest, manifest(layer))
	index := func(entry ocispec.Descriptor) []byte {
		data, err := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     ocispec.MediaTypeImageIndex,
			"manifests":     []ocispec.Descriptor{entry},
		})
		require.NoError(t, err)
		return data
	}
	half := int64(math.MaxInt64/2 + 1)

	tests := map[string]struct {
		mediaType string
		data      []byte
		limits    Limits
		wantErr   error
	}{
		"negative layer size": {
			mediaType: ocispec.MediaTypeImageManifest,
			data:      manifest(sized(layer, -1)),
			wantErr:   content.ErrInvalidDescriptorSize,
		},
		"layer sizes summing past MaxInt64": {
			mediaType: ocispec.MediaTypeImageManifest,
			data:      manifest(sized(layer, half), sized(layer, half)),
			wantErr:   ErrLimit,
		},
		"layer sizes summing past MaxInt64, no limit": {
			mediaType: ocispec.MediaTypeImageManifest,
			data:      manifest(sized(layer, half), sized(layer, half)),
			limits:    Limits{MaxCompressedBytes: math.MaxInt64},
			wantErr:   ErrLimit,
		},
		"a negative size hiding an oversized layer": {
			mediaType: ocispec.MediaTypeImageManifest,
			data:      manifest(sized(layer, 40<<20), sized(layer, -(40<<20))),
			wantErr:   content.ErrInvalidDescriptorSize,
		},
		"one layer over the limit": {
			mediaType: ocispec.MediaTypeImageManifest,
			data:      manifest(sized(layer, 40<<20)),
			wantErr:   ErrLimit,
		},
		"negative config size": {
			mediaType: ocispec.MediaTypeImageManifest,
			data: func() []byte {
				m := manifest(layer)
				return bytes.Replace(m, []byte(`"size":2`), []byte(`"size":-2`), 1)
			}(),
			wantErr: content.ErrInvalidDescriptorSize,
		},
		"negative index entry size": {
			mediaType: ocispec.MediaTypeImageIndex,
			data:      index(sized(good, -1)),
			wantErr:   content.ErrInvalidDescriptorSize,
		},
		"oversized index entry": {
			mediaType: ocispec.MediaTypeImageIndex,
			data:      index(sized(good, math.MaxInt64)),
			wantErr:   ErrLimit,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			desc := pushRaw(t, target, tt.mediaType, tt.data)
			counter := newCountingTransport()
			_, err := newClient(t, Options{Transport: counter, Limits: tt.limits}).Pull(t.Context(), mustRef(t, reg.Host+"/sizes@"+desc.Digest.String()), nil)
			assert.Zero(t, counter.count("GET blobs"), "requests: %v", counter.requests)
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}

	// The honest manifest pulls.
	_, err = newClient(t, Options{}).Pull(t.Context(), mustRef(t, reg.Host+"/sizes@"+good.Digest.String()), nil)
	require.NoError(t, err)
}
