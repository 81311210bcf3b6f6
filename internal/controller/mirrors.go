package controller

// relocateImage returns the rewrite of the .images templates see, or nil without overrides.
func (o Options) relocateImage() func(string) string {
	if o.ImageOverrides.IsZero() {
		return nil
	}
	return o.ImageOverrides.Image
}
