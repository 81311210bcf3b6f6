package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/cloudauth"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
)

// ReadPullCredentials reads a kubernetes.io/dockerconfigjson Secret of namespace; nil ref means
// the client's defaults (anonymous).
func ReadPullCredentials(ctx context.Context, reader client.Reader, ns string, ref *meta.LocalObjectReference) (source.Credentials, error) {
	if ref == nil {
		return nil, nil
	}
	var secret corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &secret); err != nil {
		return nil, &reconciler.StageError{Reason: v1alpha1.AuthenticationFailedReason, Err: fmt.Errorf("read pull secret %s/%s: %w", ns, ref.Name, err)}
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, &reconciler.StageError{Reason: v1alpha1.AuthenticationFailedReason, Err: fmt.Errorf("pull secret %s/%s has no %s key: it must be of type %s", ns, ref.Name, corev1.DockerConfigJsonKey, corev1.SecretTypeDockerConfigJson)}
	}
	creds, err := source.CredentialsFromDockerConfigJSON(data)
	if err != nil {
		return nil, &reconciler.StageError{Reason: v1alpha1.AuthenticationFailedReason, Err: fmt.Errorf("pull secret %s/%s: %w", ns, ref.Name, err)}
	}
	return creds, nil
}

// PullCredentials returns the registry credentials of spec for a resource whose Secrets and
// ServiceAccounts live in ns: spec.pullSecretRef's with provider generic, else the cloud's,
// exchanged (by cloud) for serviceAccount's identity, or the controller's own when it is empty.
// A cloud provider with an image of another registry, and a ServiceAccount's identity where the
// controller forbids it, are refused (InvalidSpec): no retry can help.
func PullCredentials(ctx context.Context, reader client.Reader, cloud *cloudauth.Exchanger, ns, serviceAccount string, spec *v1alpha1.PackageSpec, image source.Reference) (source.Credentials, error) {
	provider := spec.GetProvider()
	if provider == v1alpha1.RegistryProviderGeneric {
		return ReadPullCredentials(ctx, reader, ns, spec.PullSecretRef)
	}
	if cloud == nil {
		return nil, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: fmt.Errorf("spec.provider %s: this controller exchanges no cloud identity", provider)}
	}
	if serviceAccount != "" && ns == "" {
		return nil, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: fmt.Errorf("spec.provider %s with spec.serviceAccountName %q: a cluster-scoped resource's ServiceAccount lives in the controller's namespace, and the controller was started without --namespace", provider, serviceAccount)}
	}
	if err := cloud.CheckRegistry(provider, image.Registry); err != nil {
		return nil, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: fmt.Errorf("spec.provider %s: spec.image: %w; other registries are read with spec.provider generic (and spec.pullSecretRef)", provider, err)}
	}
	creds, err := cloud.Credentials(provider, cloudauth.Identity{Namespace: ns, ServiceAccount: serviceAccount})
	if err != nil {
		if errors.Is(err, cloudauth.ErrObjectLevelForbidden) {
			err = fmt.Errorf("spec.provider %s with ServiceAccount %s/%s: %w; remove spec.provider (or the ServiceAccount) or ask the operator", provider, ns, serviceAccount, err)
		}
		return nil, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: err}
	}
	return creds, nil
}
