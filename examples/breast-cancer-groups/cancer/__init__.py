"""The team's own code: a data loader (`cancer.data:load`) and a model builder (`cancer.model:build`)."""
