"""The closed-form density head: a per-pixel ridge regressor on frozen maps, fitted on Gram matrices."""
