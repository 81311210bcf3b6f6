package render

// Parts of Package Operator's format that pkgsync reads differently from its own.
const (
	// pkoExternalAnnotation marks an object Package Operator only observes. pkgsync applies
	// every object it renders, so it refuses such an object rather than take it over.
	pkoExternalAnnotation = "package-operator.run/external"
	// pkoDefaultClass is Package Operator's phase class for its built-in controller, which
	// applies to the cluster it runs in: pkgsync's management cluster.
	pkoDefaultClass = "default"
)
