/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import "encoding/json"

// dockerArchive is a docker-save archive of img tagged name.
func dockerArchive(img image, name string) ([]byte, error) {
	cfgName := digest(img.config) + ".json"
	layerName := digest(img.layer) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{name}, "Layers": []string{layerName},
	}})
	if err != nil {
		return nil, err
	}
	return tarFiles([]archiveFile{{cfgName, img.config}, {layerName, img.layer}, {"manifest.json", manifest}})
}
