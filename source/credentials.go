package source

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Credentials return the credential for a registry host (host or host:port). An empty
// credential means anonymous access.
type Credentials func(ctx context.Context, host string) (auth.Credential, error)

// CredentialsFromDockerConfig reads credentials the way docker does: the config file at path
// (empty: $DOCKER_CONFIG/config.json or ~/.docker/config.json), including its credential
// helpers and credential store.
func CredentialsFromDockerConfig(path string) (Credentials, error) {
	opts := credentials.StoreOptions{}
	var (
		store *credentials.DynamicStore
		err   error
	)
	if path == "" {
		store, err = credentials.NewStoreFromDocker(opts)
	} else {
		store, err = credentials.NewStore(path, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("load docker config %s: %w", path, err)
	}
	return Credentials(credentials.Credential(store)), nil
}

// CredentialsFromDockerConfigJSON reads the credentials of a kubernetes.io/dockerconfigjson
// Secret (its .dockerconfigjson key: {"auths": {"HOST": {"auth": ...}}}).
func CredentialsFromDockerConfigJSON(data []byte) (Credentials, error) {
	store, err := credentials.NewMemoryStoreFromDockerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("read docker config JSON: %w", err)
	}
	return Credentials(credentials.Credential(store)), nil
}
