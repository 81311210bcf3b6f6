package applier

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch

// maxConfigFromBytes bounds what spec.configFrom reads into one configuration, summed over its
// entries: the configuration is parsed, merged, validated and rendered on every change, and a
// ConfigMap may hold 1 MiB.
const maxConfigFromBytes = 1 << 20

// ConfigInput is the configuration a resource renders with: spec.config with what
// spec.configFrom reads merged under it.
type ConfigInput struct {
	// Raw is the configuration as JSON; nil without one.
	Raw []byte
	// Digest fingerprints the configuration for status (lastAppliedConfigDigest, history): the
	// sha256 of spec.config and, with spec.configFrom, of what the ConfigMaps gave and of the
	// identity and resourceVersion of the Secrets read, never of their values. A digest of a
	// value is no secret when the value has little entropy (a password can be found by trying
	// digests), and status is read by more than may read the Secret.
	Digest string
	// RenderKey fingerprints the whole configuration for the render cache: a keyed HMAC (the key
	// is random per process and never leaves it) of the namespace and the configuration when a
	// Secret contributed, so that what the cache holds in memory is not a plain digest of a
	// Secret's value either, and such a render is shared only within its namespace.
	RenderKey string
	// secretValues are the values Secrets contributed, as they may be written in an error
	// message, longest first: redact removes them.
	secretValues []string
}

// renderKeySecret keys the HMAC of configurations that hold values of Secrets.
var renderKeySecret = []byte(rand.Text() + rand.Text())

// ConfigSourceReader reads the ConfigMaps and Secrets of spec.configFrom.
type ConfigSourceReader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// ReadConfig reads spec.configFrom of a resource from namespace (its own, or the controller's)
// with reader and merges spec.config over it. Without spec.configFrom it is spec.config alone,
// with the digest it always had.
func ReadConfig(ctx context.Context, reader ConfigSourceReader, namespace string, spec *v1alpha1.PackageSpec) (*ConfigInput, error) {
	if len(spec.ConfigFrom) == 0 {
		in := &ConfigInput{Digest: configDigestOf(spec)}
		if spec.Config != nil {
			in.Raw = spec.Config.Raw
		}
		in.RenderKey = in.Digest
		return in, nil
	}
	merged := map[string]any{}
	digest := sha256.New()
	if spec.Config != nil {
		digest.Write(spec.Config.Raw)
	}
	var secrets []string
	secretRead := false
	total := 0
	for i, src := range spec.ConfigFrom {
		key := src.GetKey()
		fmt.Fprintf(digest, "\x00%d\x00%s\x00%s\x00%s\x00%s\x00", i, src.Kind, src.Name, key, src.TargetPath)
		value, found, id, err := readConfigSource(ctx, reader, namespace, src, key)
		if err != nil {
			return nil, err
		}
		if !found {
			if src.Optional {
				digest.Write([]byte("absent"))
				continue
			}
			return nil, &reconciler.StageError{Reason: v1alpha1.ConfigSourceNotFoundReason, Err: fmt.Errorf("spec.configFrom[%d]: %s", i, id)}
		}
		secret := src.Kind == "Secret"
		if total += len(value); total > maxConfigFromBytes {
			return nil, &reconciler.StageError{Reason: v1alpha1.InvalidConfigSourceReason,
				Err: fmt.Errorf("spec.configFrom[%d]: the data read are over %d bytes", i, maxConfigFromBytes)}
		}
		if secret {
			secretRead = true
			digest.Write([]byte(id)) // uid and resourceVersion, not the value
		} else {
			digest.Write(value)
		}
		values, err := mergeSource(merged, value, src)
		if err != nil {
			return nil, &reconciler.StageError{Reason: v1alpha1.InvalidConfigSourceReason,
				Err: fmt.Errorf("spec.configFrom[%d]: key %q of %s %s/%s: %w", i, key, src.Kind, namespace, src.Name, err)}
		}
		if secret {
			secrets = append(secrets, values...)
		}
	}
	if spec.Config != nil && len(spec.Config.Raw) > 0 {
		explicit, err := parseConfigObject(spec.Config.Raw)
		if err != nil {
			return nil, &reconciler.StageError{Reason: v1alpha1.InvalidConfigReason, Err: fmt.Errorf("spec.config: %w", err)}
		}
		mergeConfig(merged, explicit)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("encode configuration: %w", err)
	}
	return &ConfigInput{Raw: raw, Digest: "sha256:" + hex.EncodeToString(digest.Sum(nil)),
		RenderKey: renderKeyOf(namespace, raw, secretRead), secretValues: redactionForms(secrets)}, nil
}

// mergeSource merges the value of one configFrom entry into merged: as a string at its
// targetPath, else as the YAML or JSON object it must hold. It returns the scalar values it
// merged, which are to be redacted when they came from a Secret. For a Secret the parser's
// message is not given, as it may quote what it could not parse.
func mergeSource(merged map[string]any, value []byte, src v1alpha1.ConfigSource) ([]string, error) {
	if src.TargetPath != "" {
		setPath(merged, strings.Split(src.TargetPath, "."), string(value))
		return []string{string(value)}, nil
	}
	obj, err := parseConfigObject(value)
	if err != nil {
		if src.Kind == "Secret" {
			return nil, errors.New("does not hold a YAML or JSON object")
		}
		return nil, err
	}
	mergeConfig(merged, obj)
	return appendScalars(nil, obj), nil
}

// renderKeyOf keys the render cache for a merged configuration: its digest, or, when a Secret
// contributed, a keyed HMAC of it and of the namespace. The namespace is keyed in so that a
// render made from one namespace's Secret values is found only by resources of that namespace:
// another namespace cannot confirm a guess of those values by rendering the same image with the
// same configuration.
func renderKeyOf(namespace string, raw []byte, secretRead bool) string {
	if !secretRead {
		sum := sha256.Sum256(raw)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	mac := hmac.New(sha256.New, renderKeySecret)
	mac.Write([]byte(namespace))
	mac.Write([]byte{0})
	mac.Write(raw)
	return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
}

// readConfigSource reads the key of one entry. found is false when the object or its key is
// missing; id then says which, and otherwise names the object by uid and resourceVersion (for
// the digest of a Secret).
func readConfigSource(ctx context.Context, reader ConfigSourceReader, namespace string, src v1alpha1.ConfigSource, key string) (value []byte, found bool, id string, err error) {
	name := client.ObjectKey{Namespace: namespace, Name: src.Name}
	var data map[string][]byte
	var obj client.Object
	switch src.Kind {
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		obj = cm
		err = reader.Get(ctx, name, cm)
		if err == nil {
			data = map[string][]byte{}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
		}
	case "Secret":
		s := &corev1.Secret{}
		obj = s
		err = reader.Get(ctx, name, s)
		data = s.Data
	default:
		return nil, false, "", &reconciler.StageError{Reason: v1alpha1.InvalidConfigSourceReason, Err: fmt.Errorf("spec.configFrom: kind %q is neither ConfigMap nor Secret", src.Kind)}
	}
	if apierrors.IsNotFound(err) {
		return nil, false, fmt.Sprintf("%s %s/%s not found", src.Kind, namespace, src.Name), nil
	}
	if err != nil {
		return nil, false, "", fmt.Errorf("read %s %s/%s: %w", src.Kind, namespace, src.Name, err)
	}
	v, ok := data[key]
	if !ok {
		return nil, false, fmt.Sprintf("%s %s/%s has no key %q", src.Kind, namespace, src.Name, key), nil
	}
	return v, true, string(obj.GetUID()) + "/" + obj.GetResourceVersion(), nil
}

// parseConfigObject parses YAML or JSON that must hold an object; integers stay integers, as
// the schema validator needs.
func parseConfigObject(data []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	}
	return nil, errors.New("does not hold an object")
}

// mergeConfig merges src into dst: maps key by key, anything else (lists included) replaced.
func mergeConfig(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeConfig(dm, sm)
				continue
			}
			cp := map[string]any{}
			mergeConfig(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// setPath sets the value at path, making maps on the way (a value that is not a map there is
// replaced).
func setPath(m map[string]any, path []string, value any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// appendScalars appends every scalar of v in the form an error message prints it.
func appendScalars(out []string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			out = appendScalars(out, e)
		}
	case []any:
		for _, e := range v {
			out = appendScalars(out, e)
		}
	case nil:
	case string:
		out = append(out, v)
	default:
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// redactionForms returns the values with the forms an error message may print them in (as
// they are, quoted, JSON-escaped), without empty ones, longest first so that a value that
// contains another is removed whole.
func redactionForms(values []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range values {
		add(v)
		q := strconv.Quote(v)
		add(q[1 : len(q)-1])
		if js, err := json.Marshal(v); err == nil {
			add(string(js[1 : len(js)-1]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// Redact removes the values of Secrets from an error's message (what status, events and logs
// show of it), keeping the error's types for reconciler.ReasonFor. A render error may quote a value of
// the configuration: the schema validator does ("Invalid value: ..."), and so may a template
// function that fails on it.
func (in *ConfigInput) Redact(err error) error {
	if err == nil || len(in.secretValues) == 0 {
		return err
	}
	return &redactedError{msg: in.redactText(err.Error()), err: err}
}

// RedactResult removes the values of Secrets from what a pass says of the objects it applied,
// before status shows it: why each is not available (kstatus's message and the object's own
// conditions, which its controller writes and may fill with a rendered value, as the API
// server's refusal of a pod quotes its template) and the conditions mapped from them.
func (in *ConfigInput) RedactResult(res *apply.Result) {
	if res == nil || len(in.secretValues) == 0 {
		return
	}
	for i := range res.Phases {
		for j := range res.Phases[i].NotAvailable {
			na := &res.Phases[i].NotAvailable[j]
			na.Reason = in.redactText(na.Reason)
		}
	}
	for i := range res.Conditions {
		res.Conditions[i].Message = in.redactText(res.Conditions[i].Message)
	}
}

func (in *ConfigInput) redactText(msg string) string {
	for _, v := range in.secretValues {
		msg = strings.ReplaceAll(msg, v, "[redacted]")
	}
	return msg
}

// redactedError is an error whose message has Secret values removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// ConfigReader is what reads spec.configFrom of owner: a client impersonating the ServiceAccount
// owner applies with (serviceAccount, or --default-service-account for a namespaced owner), or
// controller, the controller's own reader, when there is none. A fleet's preflight reads its
// members' configuration through it too, as the member will.
func (r *Applier) ConfigReader(owner apply.Owner, serviceAccount string, controller ConfigSourceReader) (ConfigSourceReader, error) {
	sa := r.serviceAccountFor(owner, serviceAccount)
	if sa == "" {
		return controller, nil
	}
	target, err := r.Targets.managementTarget(r.serviceAccountNamespace(owner), sa)
	if err != nil {
		return nil, err
	}
	return target.Client, nil
}

// configDigestOf fingerprints the configuration, to tell a config change from a new image.
func configDigestOf(spec *v1alpha1.PackageSpec) string {
	h := sha256.New()
	if spec.Config != nil {
		h.Write(spec.Config.Raw)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
