package verify

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
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
