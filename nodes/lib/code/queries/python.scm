; Python: classes, functions and methods; calls, attribute uses and imported names.
(class_definition name: (identifier) @name.definition.class)
(function_definition name: (identifier) @name.definition.function)
(module (expression_statement (assignment left: (identifier) @name.definition.constant)))
(call function: [(identifier) @name.reference.call
                 (attribute attribute: (identifier) @name.reference.call)])
(attribute attribute: (identifier) @name.reference.attribute)
(import_from_statement name: (dotted_name (identifier) @name.reference.import))
(import_from_statement name: (aliased_import name: (dotted_name (identifier) @name.reference.import)))
(import_from_statement module_name: (dotted_name (identifier) @name.reference.module))
(import_statement name: (dotted_name (identifier) @name.reference.module))
(argument_list (identifier) @name.reference.use)
(type (identifier) @name.reference.type)
